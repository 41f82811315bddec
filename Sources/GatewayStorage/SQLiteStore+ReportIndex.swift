import Foundation
import GRDB
import GatewayCore

/// Keeps the keyword report's facts in `report_people` and `report_purchases`, group by
/// group (``ReportIndexStore``): the triggers queue each record written, changed or
/// deleted, and a batch makes the facts of the groups those records touch again from the
/// groups' records, in one transaction with the queue's entries it took.
extension SQLiteStore: ReportIndexStore {
    public func indexReport(limit: Int) async throws -> ReportIndexBatch? {
        try await pool.write { db in
            let entries = try Row.fetchAll(
                db, sql: "SELECT id, seq FROM report_queue ORDER BY id LIMIT ?", arguments: [limit])
            guard let last: Int64 = entries.last?["id"] else { return nil }
            let queued = Array(Set(entries.map { $0["seq"] as Int64 }))
            let queuedList = Self.jsonArray(queued)
            var groups = Set(
                try Int64.fetchAll(
                    db,
                    sql: "SELECT DISTINCT group_id FROM report_members WHERE seq IN (SELECT value FROM json_each(?))",
                    arguments: [queuedList]))
            let fresh = try Self.reportRecords(db, seqs: queuedList)
            groups.formUnion(try Self.groups(linkedTo: fresh.map(\.1), db))
            let groupList = Self.jsonArray(Array(groups))
            let freshSeqs = Set(fresh.map(\.0))
            let members = try Int64.fetchAll(
                db, sql: "SELECT seq FROM report_members WHERE group_id IN (SELECT value FROM json_each(?))",
                arguments: [groupList]
            ).filter { !freshSeqs.contains($0) }
            var records = fresh
            for chunk in members.chunked(into: 5000) {
                records += try Self.reportRecords(db, seqs: Self.jsonArray(chunk))
            }
            for table in ["report_nodes", "report_members", "report_people", "report_purchases"] {
                try db.execute(
                    sql: "DELETE FROM \(table) WHERE group_id IN (SELECT value FROM json_each(?))",
                    arguments: [groupList])
            }
            try Self.write(IndexedGroup.groups(records.map { (seq: $0.0, record: $0.1) }, node: Self.nodeNumber), db)
            try db.execute(
                sql: "DELETE FROM report_postbacks WHERE seq IN (SELECT value FROM json_each(?))",
                arguments: [queuedList])
            for (seq, record) in fresh {
                guard let postback = SKANReport.indexedPostback(record) else { continue }
                try db.executeCached(
                    """
                    INSERT INTO report_postbacks (seq, app_id, received_at, source, won, has_value, fine, coarse, events)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                    [
                        seq, postback.appID, postback.receivedAt.timeIntervalSinceReferenceDate, postback.source,
                        postback.won, postback.hasValue, postback.fineValue, postback.coarseValue,
                        Self.jsonArray(postback.events),
                    ])
            }
            try db.execute(sql: "DELETE FROM report_queue WHERE id <= ?", arguments: [last])
            return ReportIndexBatch(taken: entries.count, last: last)
        }
    }

    /// The groups that records link to, by their nodes.
    static func groups(linkedTo records: [AttributionRecord], _ db: Database) throws -> Set<Int64> {
        var groups: Set<Int64> = []
        for chunk in KeywordReport.indexNodeNumbers(of: records).chunked(into: 5000) {
            groups.formUnion(
                try Int64.fetchAll(
                    db,
                    sql: "SELECT DISTINCT group_id FROM report_nodes WHERE node IN (SELECT value FROM json_each(?))",
                    arguments: [Self.jsonArray(chunk)]))
        }
        return groups
    }

    public func reportIndexQueue() async throws -> (waiting: Int, newest: Int64?) {
        try await pool.read { db in
            let row = try Row.fetchOne(db, sql: "SELECT COUNT(*), MAX(id) FROM report_queue")
            return (row?[0] ?? 0, row?[1])
        }
    }

    /// Writes each group's nodes, members and facts under a new group id.
    static func write(_ groups: [IndexedGroup<Int64>], _ db: Database) throws {
        guard !groups.isEmpty else { return }
        var nextGroup = (try Int64.fetchOne(db, sql: "SELECT MAX(group_id) FROM report_members") ?? 0) + 1
        var attributionIDs: [KeywordReport.Attribution: Int64] = [:]
        func attributionID(_ attribution: KeywordReport.Attribution) throws -> Int64 {
            if let id = attributionIDs[attribution] { return id }
            let id = try Self.attributionID(attribution, db)
            attributionIDs[attribution] = id
            return id
        }
        for facts in groups {
            let group = nextGroup
            nextGroup += 1
            for seq in facts.seqs {
                try db.executeCached("INSERT INTO report_members (seq, group_id) VALUES (?, ?)", [seq, group])
            }
            for node in facts.nodes {
                try db.executeCached("INSERT INTO report_nodes (node, group_id) VALUES (?, ?)", [node, group])
            }
            for person in facts.people {
                try db.executeCached(
                    """
                    INSERT INTO report_people (group_id, app_id, line_id, attribution_id, installed_at, record_id,
                        attributed, country, is_test) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                    [
                        group, person.appID, try attributionID(person.line), try attributionID(person.attribution),
                        person.installedAt.timeIntervalSinceReferenceDate,
                        person.recordID, person.attributed, person.country,
                        person.isTest,
                    ])
            }
            for purchase in facts.purchases {
                try db.executeCached(
                    """
                    INSERT INTO report_purchases (group_id, app_id, buyer, purchased_at, line_id, country, converts,
                        refunded, revenue, currency) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                    [
                        group, purchase.appID, group << 32 | Int64(purchase.buyer),
                        purchase.time.timeIntervalSinceReferenceDate, try attributionID(purchase.line),
                        purchase.country, purchase.converts, purchase.refunded, purchase.revenue.map { "\($0)" },
                        purchase.currency,
                    ])
            }
        }
    }

    /// The id of `attribution` in `report_attributions`, added when new: lines and the
    /// names installs gave are few, and a fact names them by number.
    static func attributionID(_ attribution: KeywordReport.Attribution, _ db: Database) throws -> Int64 {
        let key = ReportAttributionKey.text(attribution)
        if let id = try Int64.fetchOne(db, sql: "SELECT id FROM report_attributions WHERE key = ?", arguments: [key]) {
            return id
        }
        try db.execute(
            sql: """
                INSERT INTO report_attributions (key, app_id, network, campaign_id, campaign, ad_group_id, ad_group,
                    keyword_id, keyword, match_type) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                key, attribution.appID, attribution.network, attribution.campaignID, attribution.campaign,
                attribution.adGroupID, attribution.adGroup, attribution.keywordID, attribution.keyword,
                attribution.matchType,
            ])
        return db.lastInsertedRowID
    }

    static func nodeNumber(_ name: String) -> Int64 { KeywordReport.indexNodeNumber(name) }

    /// The records of `seqs` (a JSON array) the report reads, as ``reportRecords(appID:kinds:after:limit:)`` gives them.
    static func reportRecords(_ db: Database, seqs: String) throws -> [(Int64, AttributionRecord)] {
        let rows = try Row.fetchCursor(db, sql: reportRecordsBySeq, arguments: [seqs])
        var records: [(Int64, AttributionRecord)] = []
        let members = ReportFields.Member.allCases.indices
        while let row = try rows.next() {
            let values = members.map { index in Self.text(row[4 + index]) }
            if let record = ReportFields.record(recordID: row[1], provider: row[2], appID: row[3], values) {
                records.append((row[0], record))
            }
        }
        return records
    }

    static let reportRecordsBySeq: String = {
        let members = ReportFields.Member.allCases.map { member in
            "body \(member.value == .text ? "->>" : "->") '$.\(member.name)'"
        }
        return """
            SELECT seq, record_id, provider, app_id, \(members.joined(separator: ", ")) FROM records
            WHERE seq IN (SELECT value FROM json_each(?1))
                AND (CASE WHEN json_valid(body) THEN body ->> '$.kind' END) IN ('install', 'reinstall', 'purchase', 'refund', 'postback')
            """
    }()

    static func jsonArray(_ values: some Sequence<Int64>) -> String {
        "[" + values.map(String.init).joined(separator: ",") + "]"
    }
}

extension Array {
    func chunked(into size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
