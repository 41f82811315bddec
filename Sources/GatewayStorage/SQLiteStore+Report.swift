import Foundation
import GRDB
import GatewayCore

extension SQLiteStore {
    /// Reads the members out of each body with SQLite's JSON operators, which parse a body
    /// once for all of them; a body that is not JSON is left out rather than failing the page.
    public func reportRecords(appID: String?, kinds: Set<RecordKind>, after cursor: Int64, limit: Int) async throws
        -> ReportPage
    {
        let kindList = Self.jsonArray(kinds.map(\.rawValue).sorted())
        return try await pool.read { db in
            let scan = try Row.fetchOne(
                db,
                sql:
                    "SELECT COUNT(*) AS n, MAX(seq) AS last FROM (SELECT seq FROM records WHERE seq > ? ORDER BY seq LIMIT ?)",
                arguments: [cursor, limit])
            let scanned: Int = scan?["n"] ?? 0
            guard scanned > 0, let last: Int64 = scan?["last"] else {
                return ReportPage(records: [], scanned: 0, cursor: cursor)
            }
            let rows = try Row.fetchCursor(
                db, sql: Self.reportQuery, arguments: [cursor, last, appID, kindList])
            var records: [AttributionRecord] = []
            let members = ReportFields.Member.allCases.indices
            while let row = try rows.next() {
                let values = members.map { index in Self.text(row[3 + index]) }
                if let record = ReportFields.record(
                    recordID: row[0], provider: row[1], appID: row[2], values)
                {
                    records.append(record)
                }
            }
            return ReportPage(records: records, scanned: scanned, cursor: last)
        }
    }

    /// A member's value as text: a hand-edited body's number where text belongs is read
    /// as its digits rather than stopping the process, as GRDB's `String` conversion would.
    static func text(_ value: DatabaseValue) -> String? {
        switch value.storage {
        case .string(let text): text
        case .int64(let number): String(number)
        case .double(let number): String(number)
        case .blob, .null: nil
        }
    }

    static let reportQuery: String = {
        let members = ReportFields.Member.allCases.map { member in
            "body \(member.value == .text ? "->>" : "->") '$.\(member.name)'"
        }
        return """
            SELECT record_id, provider, app_id, \(members.joined(separator: ", ")) FROM records
            WHERE seq > ?1 AND seq <= ?2 AND (?3 IS NULL OR app_id = ?3)
                AND (CASE WHEN json_valid(body) THEN body ->> '$.kind' END) IN (SELECT value FROM json_each(?4))
            ORDER BY seq
            """
    }()
}
