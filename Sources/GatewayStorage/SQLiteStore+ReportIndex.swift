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
            let freshSeqs = Set(fresh.map(\.0))
            let former = try Self.pairs("SELECT seq, group_id FROM report_members", Array(groups), db)
            let members = former.map(\.key).filter { !freshSeqs.contains($0) }
            var records = fresh
            for chunk in members.chunked(into: 5000) {
                records += try Self.reportRecords(db, seqs: Self.jsonArray(chunk))
            }
            try Self.write(
                IndexedGroup.groups(records.map { (seq: $0.0, record: $0.1) }, node: Self.nodeNumber),
                replacing: Array(groups), members: former, db)
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

    /// Writes each group's nodes, members and facts in place of those of the `former`
    /// groups (with their `members`): a group keeps a former id where it can
    /// (``ReportIndexChanges``), and only the rows that differ are deleted and inserted.
    static func write(_ groups: [IndexedGroup<Int64>], replacing former: [Int64], members: [Pair], _ db: Database)
        throws
    {
        guard !groups.isEmpty || !members.isEmpty else { return }
        var nextGroup = (try Int64.fetchOne(db, sql: "SELECT MAX(group_id) FROM report_members") ?? 0) + 1
        let ids = ReportIndexChanges.keptIDs(
            of: groups, formerGroups: Dictionary(members.map { ($0.key, $0.group) }) { first, _ in first }
        ).map { kept in
            kept
                ?? {
                    defer { nextGroup += 1 }
                    return nextGroup
                }()
        }
        var attributionIDs: [KeywordReport.Attribution: Int64] = [:]
        for attribution in ReportIndexRows.attributions(of: groups) {
            attributionIDs[attribution] = try Self.attributionID(attribution, db)
        }
        let rows = ReportIndexRows(groups, ids: ids) { attributionIDs[$0] ?? 0 }
        let changes = rows.changes(
            members: members, nodes: try Self.pairs("SELECT node, group_id FROM report_nodes", former, db),
            people: try Self.people(of: former, db), purchases: try Self.purchases(of: former, db))
        for (table, column, keys) in [
            ("report_members", "seq", changes.deleted.members), ("report_nodes", "node", changes.deleted.nodes),
            ("report_people", "rowid", changes.deleted.people),
            ("report_purchases", "rowid", changes.deleted.purchases),
        ] where !keys.isEmpty {
            try db.execute(
                sql: "DELETE FROM \(table) WHERE \(column) IN (SELECT value FROM json_each(?))",
                arguments: [Self.jsonArray(keys)])
        }
        for pair in changes.added.members {
            try db.executeCached("INSERT INTO report_members (seq, group_id) VALUES (?, ?)", [pair.key, pair.group])
        }
        for pair in changes.added.nodes {
            try db.executeCached("INSERT INTO report_nodes (node, group_id) VALUES (?, ?)", [pair.key, pair.group])
        }
        for person in changes.added.people {
            try db.executeCached(
                """
                INSERT INTO report_people (group_id, app_id, line_id, attribution_id, installed_at, record_id,
                    attributed, country, is_test) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    person.group, person.appID, person.line, person.attribution, person.installedAt, person.recordID,
                    person.attributed, person.country, person.isTest,
                ])
        }
        for purchase in changes.added.purchases {
            try db.executeCached(
                """
                INSERT INTO report_purchases (group_id, app_id, buyer, purchased_at, line_id, country, converts,
                    refunded, revenue, currency) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    purchase.group, purchase.appID, purchase.buyer, purchase.time, purchase.line, purchase.country,
                    purchase.converts, purchase.refunded, purchase.revenue, purchase.currency,
                ])
        }
    }

    typealias Pair = ReportIndexRows.Pair

    /// The rows `select` (a key and a group id) reads of `groups`.
    static func pairs(_ select: String, _ groups: [Int64], _ db: Database) throws -> [Pair] {
        guard !groups.isEmpty else { return [] }
        return try Row.fetchAll(
            db, sql: "\(select) WHERE group_id IN (SELECT value FROM json_each(?))", arguments: [jsonArray(groups)]
        ).map { Pair(key: $0[0], group: $0[1]) }
    }

    static func people(of groups: [Int64], _ db: Database) throws -> [(key: Int64, row: ReportIndexRow.Person)] {
        guard !groups.isEmpty else { return [] }
        return try Row.fetchAll(
            db,
            sql: """
                SELECT rowid, group_id, app_id, line_id, attribution_id, installed_at, record_id, attributed, country,
                    is_test
                FROM report_people WHERE group_id IN (SELECT value FROM json_each(?))
                """, arguments: [jsonArray(groups)]
        ).map { row in
            (
                row[0],
                ReportIndexRow.Person(
                    group: row[1], appID: row[2], line: row[3], attribution: row[4], installedAt: row[5],
                    recordID: row[6], attributed: row[7], country: row[8], isTest: row[9])
            )
        }
    }

    static func purchases(of groups: [Int64], _ db: Database) throws -> [(key: Int64, row: ReportIndexRow.Purchase)] {
        guard !groups.isEmpty else { return [] }
        return try Row.fetchAll(
            db,
            sql: """
                SELECT rowid, group_id, app_id, buyer, purchased_at, line_id, country, converts, refunded, revenue,
                    currency
                FROM report_purchases WHERE group_id IN (SELECT value FROM json_each(?))
                """, arguments: [jsonArray(groups)]
        ).map { row in
            (
                row[0],
                ReportIndexRow.Purchase(
                    group: row[1], appID: row[2], buyer: row[3], time: row[4], line: row[5], country: row[6],
                    converts: row[7], refunded: row[8], revenue: row[9], currency: row[10])
            )
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
