import Foundation
import GatewayCore
import PostgresNIO

/// Keeps the keyword report's facts in `report_people` and `report_purchases`, group by
/// group (``ReportIndexStore``): the triggers queue each record written, changed or
/// deleted, and a batch makes the facts of the groups those records touch again from the
/// groups' records, in one transaction with the queue's entries it took. Replicas take
/// turns: a batch holds an advisory lock until it commits.
extension PostgresStore: ReportIndexStore {
    /// Any 64-bit number no other application of the database uses for its own lock.
    static let reportIndexLock: Int64 = 0x4154_5452_4757_0002

    public func indexReport(limit: Int) async throws -> ReportIndexBatch? {
        try await transaction { [logger] connection in
            _ = try await connection.query("SELECT pg_advisory_xact_lock(\(Self.reportIndexLock))", logger: logger)
            var entries: [Int64] = []
            var queued: Set<Int64> = []
            let rows = try await connection.query(
                "SELECT id, seq FROM report_queue ORDER BY id LIMIT \(Int64(limit))", logger: logger)
            for try await (id, seq) in rows.decode((Int64, Int64).self) {
                entries.append(id)
                queued.insert(seq)
            }
            guard let last = entries.last else { return nil }
            var groups = Set(
                try await Self.int64s(
                    connection.query(
                        "SELECT DISTINCT group_id FROM report_members WHERE seq = ANY(\(Array(queued))::int8[])",
                        logger: logger)))
            let fresh = try await Self.reportRecords(connection, seqs: Array(queued), logger: logger)
            groups.formUnion(try await Self.groups(linkedTo: fresh.map(\.record), connection, logger))
            let freshSeqs = Set(fresh.map(\.seq))
            let members = try await Self.int64s(
                connection.query(
                    "SELECT seq FROM report_members WHERE group_id = ANY(\(Array(groups))::int8[])", logger: logger)
            ).filter { !freshSeqs.contains($0) }
            let records = try await fresh + Self.reportRecords(connection, seqs: members, logger: logger)
            for table in ["report_nodes", "report_members", "report_people", "report_purchases"] {
                _ = try await connection.query(
                    "DELETE FROM \(unescaped: table) WHERE group_id = ANY(\(Array(groups))::int8[])", logger: logger)
            }
            try await Self.write(IndexedGroup.groups(records, node: KeywordReport.indexNodeNumber), connection, logger)
            try await Self.writePostbacks(of: fresh, queued: Array(queued), connection, logger)
            _ = try await connection.query(
                "DELETE FROM report_queue WHERE id = ANY(\(entries)::int8[])", logger: logger)
            return ReportIndexBatch(taken: entries.count, last: last)
        }
    }

    /// The groups that records link to, by their nodes.
    static func groups(linkedTo records: [AttributionRecord], _ connection: PostgresConnection, _ logger: Logger)
        async throws -> [Int64]
    {
        try await int64s(
            connection.query(
                """
                SELECT DISTINCT group_id FROM report_nodes
                WHERE node = ANY(\(KeywordReport.indexNodeNumbers(of: records))::int8[])
                """, logger: logger))
    }

    public func reportIndexQueue() async throws -> (waiting: Int, newest: Int64?) {
        let rows = try await query("SELECT COUNT(*), MAX(id) FROM report_queue", logger: logger)
        for try await (waiting, newest) in rows.decode((Int64, Int64?).self) { return (Int(waiting), newest) }
        return (0, nil)
    }

    /// Writes each group's nodes, members and facts under a new group id, a table at a
    /// time: one statement each, the rows as column arrays.
    static func write(_ groups: [IndexedGroup<Int64>], _ connection: PostgresConnection, _ logger: Logger) async throws
    {
        guard !groups.isEmpty else { return }
        let ids = try await int64s(
            connection.query("SELECT nextval('report_groups') FROM generate_series(1, \(groups.count))", logger: logger)
        )
        var attributions: Set<KeywordReport.Attribution> = []
        for group in groups {
            for person in group.people { attributions.formUnion([person.line, person.attribution]) }
            for purchase in group.purchases { attributions.insert(purchase.line) }
        }
        let attributionIDs = try await self.attributionIDs(attributions, connection, logger)
        var members: (seqs: [Int64], groups: [Int64]) = ([], [])
        var nodes: (nodes: [Int64], groups: [Int64]) = ([], [])
        var people = PeopleColumns()
        var purchases = PurchaseColumns()
        for (group, id) in zip(groups, ids) {
            members.seqs += group.seqs
            members.groups += Array(repeating: id, count: group.seqs.count)
            nodes.nodes += group.nodes
            nodes.groups += Array(repeating: id, count: group.nodes.count)
            for person in group.people { people.append(person, group: id, attributionIDs) }
            for purchase in group.purchases { purchases.append(purchase, group: id, attributionIDs) }
        }
        _ = try await connection.query(
            "INSERT INTO report_members (seq, group_id) SELECT * FROM unnest(\(members.seqs)::int8[], \(members.groups)::int8[])",
            logger: logger)
        _ = try await connection.query(
            "INSERT INTO report_nodes (node, group_id) SELECT * FROM unnest(\(nodes.nodes)::int8[], \(nodes.groups)::int8[])",
            logger: logger)
        _ = try await connection.query(
            """
            INSERT INTO report_people (group_id, app_id, line_id, attribution_id, installed_at, record_id, attributed,
                country, is_test)
            SELECT * FROM unnest(\(people.groups)::int8[], \(people.apps)::text[], \(people.lines)::int8[],
                \(people.attributions)::int8[], \(people.installedAt)::float8[], \(people.recordIDs)::text[],
                \(people.attributed)::bool[], \(people.countries)::int4[], \(people.tests)::bool[])
            """, logger: logger)
        // PostgresNIO binds no array with NULL elements: an absent amount or currency goes
        // as empty text, with a mask beside it.
        _ = try await connection.query(
            """
            INSERT INTO report_purchases (group_id, app_id, buyer, purchased_at, line_id, country, converts,
                refunded, revenue, currency)
            SELECT g, a, b, t, l, c, cv, r, CASE WHEN hr THEN rv END, CASE WHEN hc THEN cu END
            FROM unnest(\(purchases.groups)::int8[], \(purchases.apps)::text[], \(purchases.buyers)::int8[],
                \(purchases.times)::float8[], \(purchases.lines)::int8[], \(purchases.countries)::int4[],
                \(purchases.converts)::bool[], \(purchases.refunded)::bool[], \(purchases.revenues)::text[],
                \(purchases.hasRevenue)::bool[], \(purchases.currencies)::text[], \(purchases.hasCurrency)::bool[])
                AS p(g, a, b, t, l, c, cv, r, rv, hr, cu, hc)
            """, logger: logger)
    }

    /// Replaces the postbacks rows of the `queued` records with those `records` make.
    static func writePostbacks(
        of records: [(seq: Int64, record: AttributionRecord)], queued: [Int64], _ connection: PostgresConnection,
        _ logger: Logger
    ) async throws {
        _ = try await connection.query(
            "DELETE FROM report_postbacks WHERE seq = ANY(\(queued)::int8[])", logger: logger)
        var rows = PostbackColumns()
        for (seq, record) in records {
            if let postback = SKANReport.indexedPostback(record) { rows.append(postback, seq: seq) }
        }
        guard !rows.seqs.isEmpty else { return }
        _ = try await connection.query(
            """
            INSERT INTO report_postbacks (seq, app_id, received_at, source, won, has_value, fine, coarse, events)
            SELECT s, a, t, so, w, v, CASE WHEN hf THEN f END, CASE WHEN hc THEN c END, e
            FROM unnest(\(rows.seqs)::int8[], \(rows.apps)::text[], \(rows.times)::float8[], \(rows.sources)::text[],
                \(rows.won)::bool[], \(rows.hasValue)::bool[], \(rows.fine)::int4[], \(rows.hasFine)::bool[],
                \(rows.coarse)::text[], \(rows.hasCoarse)::bool[], \(rows.events)::text[])
                AS p(s, a, t, so, w, v, f, hf, c, hc, e)
            """, logger: logger)
    }

    /// The ids of `attributions` in `report_attributions`, those new added: lines and the
    /// names installs gave are few, and a fact names them by number.
    static func attributionIDs(
        _ attributions: Set<KeywordReport.Attribution>, _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> [KeywordReport.Attribution: Int64] {
        let byKey = Dictionary(attributions.map { (ReportAttributionKey.text($0), $0) }) { first, _ in first }
        var ids: [KeywordReport.Attribution: Int64] = [:]
        let known = try await connection.query(
            "SELECT key, id FROM report_attributions WHERE key = ANY(\(Array(byKey.keys))::text[])", logger: logger)
        for try await (key, id) in known.decode((String, Int64).self) { ids[byKey[key]!] = id }
        for (key, attribution) in byKey where ids[attribution] == nil {
            let added = try await connection.query(
                """
                INSERT INTO report_attributions (key, app_id, network, campaign_id, campaign, ad_group_id, ad_group,
                    keyword_id, keyword, match_type)
                VALUES (\(key), \(attribution.appID), \(attribution.network), \(attribution.campaignID),
                    \(attribution.campaign), \(attribution.adGroupID), \(attribution.adGroup), \(attribution.keywordID),
                    \(attribution.keyword), \(attribution.matchType))
                RETURNING id
                """, logger: logger)
            ids[attribution] = try await firstInt(added)
        }
        return ids
    }

    /// The records of `seqs` the report reads, as ``reportRecords(appID:kinds:after:limit:)``
    /// gives them; a body that is not JSON is left out.
    static func reportRecords(_ connection: PostgresConnection, seqs: [Int64], logger: Logger) async throws
        -> [(seq: Int64, record: AttributionRecord)]
    {
        guard !seqs.isEmpty else { return [] }
        let rows = try await connection.query(
            """
            SELECT r.seq, r.record_id, r.provider, r.app_id, \(unescaped: reportMembers)
            FROM records r CROSS JOIN LATERAL jsonb_to_record(gateway_json(r.body)) AS f(\(unescaped: reportColumns))
            WHERE r.seq = ANY(\(seqs)::int8[]) AND f.kind IN ('install', 'reinstall', 'purchase', 'refund', 'postback')
            """, logger: logger)
        var records: [(seq: Int64, record: AttributionRecord)] = []
        for try await row in rows {
            var columns = row.makeIterator()
            guard let seq = try columns.next()?.decode(Int64.self) else { continue }
            if let record = try Self.reportRecord(&columns) { records.append((seq, record)) }
        }
        return records
    }

    static func int64s(_ rows: PostgresRowSequence) async throws -> [Int64] {
        var values: [Int64] = []
        for try await value in rows.decode(Int64.self) { values.append(value) }
        return values
    }
}

/// `report_people` rows as column arrays.
private struct PeopleColumns {
    var groups: [Int64] = [], apps: [String] = [], lines: [Int64] = [], attributions: [Int64] = []
    var installedAt: [Double] = [], recordIDs: [String] = [], attributed: [Bool] = [], countries: [Int32] = []
    var tests: [Bool] = []

    mutating func append(
        _ person: KeywordReport.IndexedPerson, group: Int64, _ ids: [KeywordReport.Attribution: Int64]
    ) {
        groups.append(group)
        apps.append(person.appID)
        lines.append(ids[person.line] ?? 0)
        attributions.append(ids[person.attribution] ?? 0)
        installedAt.append(person.installedAt.timeIntervalSinceReferenceDate)
        recordIDs.append(person.recordID)
        attributed.append(person.attributed)
        countries.append(Int32(person.country))
        tests.append(person.isTest)
    }
}

/// `report_purchases` rows as column arrays, with masks where a column may be NULL.
private struct PurchaseColumns {
    var groups: [Int64] = [], apps: [String] = [], buyers: [Int64] = [], times: [Double] = [], lines: [Int64] = []
    var countries: [Int32] = [], converts: [Bool] = [], refunded: [Bool] = []
    var revenues: [String] = [], hasRevenue: [Bool] = [], currencies: [String] = [], hasCurrency: [Bool] = []

    mutating func append(
        _ purchase: KeywordReport.IndexedPurchase, group: Int64, _ ids: [KeywordReport.Attribution: Int64]
    ) {
        groups.append(group)
        apps.append(purchase.appID)
        buyers.append(group << 32 | Int64(purchase.buyer))
        times.append(purchase.time.timeIntervalSinceReferenceDate)
        lines.append(ids[purchase.line] ?? 0)
        countries.append(Int32(purchase.country))
        converts.append(purchase.converts)
        refunded.append(purchase.refunded)
        revenues.append(purchase.revenue.map { "\($0)" } ?? "")
        hasRevenue.append(purchase.revenue != nil)
        currencies.append(purchase.currency ?? "")
        hasCurrency.append(purchase.currency != nil)
    }
}

/// `report_postbacks` rows as column arrays, with masks where a column may be NULL.
private struct PostbackColumns {
    var seqs: [Int64] = [], apps: [String] = [], times: [Double] = [], sources: [String] = [], won: [Bool] = []
    var hasValue: [Bool] = [], fine: [Int32] = [], hasFine: [Bool] = [], coarse: [String] = [], hasCoarse: [Bool] = []
    var events: [String] = []

    mutating func append(_ postback: SKANReport.IndexedPostback, seq: Int64) {
        seqs.append(seq)
        apps.append(postback.appID)
        times.append(postback.receivedAt.timeIntervalSinceReferenceDate)
        sources.append(postback.source)
        won.append(postback.won)
        hasValue.append(postback.hasValue)
        fine.append(Int32(postback.fineValue ?? 0))
        hasFine.append(postback.fineValue != nil)
        coarse.append(postback.coarseValue ?? "")
        hasCoarse.append(postback.coarseValue != nil)
        let json = (try? JSONEncoder().encode(postback.events)) ?? Data("[]".utf8)
        events.append(String(decoding: json, as: UTF8.self))
    }
}
