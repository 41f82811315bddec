import Foundation
import GatewayCore
import PostgresNIO

extension PostgresStore {
    /// Reads the members out of each body with `jsonb_to_record`, which parses a body once
    /// for all of them. A page with a body PostgreSQL cannot parse (a hand-edited store)
    /// fails as a whole there; it is then read body by body, that one left out.
    public func reportRecords(appID: String?, kinds: Set<RecordKind>, after cursor: Int64, limit: Int) async throws
        -> ReportPage
    {
        let scan = try await query(
            "SELECT COUNT(*), MAX(seq) FROM (SELECT seq FROM records WHERE seq > \(cursor) ORDER BY seq LIMIT \(Int64(limit))) p",
            logger: logger)
        var page: (scanned: Int64, last: Int64?) = (0, nil)
        for try await row in scan.decode((Int64, Int64?).self) { page = row }
        guard page.scanned > 0, let last = page.last else { return ReportPage(records: [], scanned: 0, cursor: cursor) }
        let kindNames = kinds.map(\.rawValue).sorted()
        let records: [AttributionRecord]
        do {
            records = try await extracted(appID: appID, kinds: kindNames, after: cursor, through: last)
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == Self.invalidText {
            records = try await decoded(appID: appID, kinds: kinds, after: cursor, through: last)
        }
        return ReportPage(records: records, scanned: Int(page.scanned), cursor: last)
    }

    /// PostgreSQL's `invalid_text_representation`, which a body that is not JSON gives.
    static let invalidText = "22P02"

    private func extracted(appID: String?, kinds: [String], after cursor: Int64, through last: Int64) async throws
        -> [AttributionRecord]
    {
        let rows = try await query(
            """
            SELECT r.record_id, r.provider, r.app_id, \(unescaped: Self.reportMembers)
            FROM records r CROSS JOIN LATERAL jsonb_to_record(r.body::jsonb) AS f(\(unescaped: Self.reportColumns))
            WHERE r.seq > \(cursor) AND r.seq <= \(last) AND (\(appID)::text IS NULL OR r.app_id = \(appID))
                AND f.\(unescaped: BodyField.column("kind")) = ANY(\(kinds)::text[])
            ORDER BY r.seq
            """, logger: logger)
        var records: [AttributionRecord] = []
        for try await row in rows {
            var columns = row.makeIterator()
            if let record = try Self.reportRecord(&columns) { records.append(record) }
        }
        return records
    }

    /// The record of a row's next columns: its id, provider, app and ``reportMembers``.
    static func reportRecord(_ columns: inout PostgresRow.Iterator) throws -> AttributionRecord? {
        guard let id = try columns.next()?.decode(String.self), let provider = try columns.next()?.decode(String.self)
        else { return nil }
        let app = try columns.next()?.decode(String?.self) ?? nil
        var values: [String?] = []
        while let cell = columns.next() { values.append(try cell.decode(String?.self)) }
        return ReportFields.record(recordID: id, provider: provider, appID: app, values)
    }

    private func decoded(appID: String?, kinds: Set<RecordKind>, after cursor: Int64, through last: Int64)
        async throws -> [AttributionRecord]
    {
        let rows = try await query(
            """
            SELECT record_id, dedupe_key, provider, app_id, received_at, body FROM records
            WHERE seq > \(cursor) AND seq <= \(last) AND (\(appID)::text IS NULL OR app_id = \(appID)) ORDER BY seq
            """, logger: logger)
        var records: [AttributionRecord] = []
        for try await (id, key, provider, app, receivedAt, body) in rows.decode(
            (String, String, String, String?, Double, String).self)
        {
            let columns = StoredColumns(
                recordID: id, dedupeKey: key, provider: provider, appID: app, receivedAt: receivedAt)
            guard let record = try? AttributionRecord(jsonData: Data(body.utf8), keptApart: columns),
                kinds.contains(record.kind)
            else {
                continue
            }
            records.append(record.reportView)
        }
        return records
    }

    /// The members as the statements select them from `records r` and its body's fields `f`:
    /// `received_at` from its column where the body leaves it out (a body written before
    /// has it).
    static let reportMembers = ReportFields.Member.allCases.map { member in
        let field = "f.\(BodyField.column(member.name))"
        return member == .receivedAt ? "COALESCE(\(field), r.received_at::text)" : field
    }
    .joined(separator: ", ")
    /// Every member as text: `jsonb_to_record` gives a number, a boolean or an array as its
    /// JSON text there, a number with every digit it was stored with.
    static let reportColumns = ReportFields.Member.allCases.map { "\(BodyField.column($0.name)) text" }
        .joined(separator: ", ")
}
