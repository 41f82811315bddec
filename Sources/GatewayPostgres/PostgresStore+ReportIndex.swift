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
        let batch = try await indexBatch(limit: limit)
        if batch != nil { await releaseDrainedQueue() }
        return batch
    }

    /// The queue's index keeps every page an import's million entries took once the queue is
    /// empty again: PostgreSQL reuses an index's free pages but never gives them back. An
    /// empty queue with a large index is truncated, which gives both new files. Only when
    /// no statement is writing to the queue (`NOWAIT`), so that no ingest waits behind the
    /// lock; the next batch tries again. Emptiness is read through the index (`min(id)`),
    /// which the batches' own reads have cleared of the entries they deleted.
    func releaseDrainedQueue() async {
        let drained = """
            SELECT pg_relation_size('report_queue_pkey') FROM (SELECT min(id) AS first FROM report_queue) q
            WHERE q.first IS NULL
            """
        do {
            try await transaction { [logger] connection in
                let size = try await Self.firstInt(connection.query(PostgresQuery(unsafeSQL: drained), logger: logger))
                guard let size, size > Self.releasedQueueIndexBytes else { return }
                _ = try await connection.query(
                    "LOCK TABLE report_queue IN ACCESS EXCLUSIVE MODE NOWAIT", logger: logger)
                guard
                    try await Self.firstInt(connection.query(PostgresQuery(unsafeSQL: drained), logger: logger))
                        != nil
                else { return }
                _ = try await connection.query("TRUNCATE report_queue", logger: logger)
                logger.info("report queue drained: its index's pages given back", metadata: ["bytes": "\(size)"])
            }
        } catch {
            logger.debug("report queue not truncated", metadata: ["error": "\(Self.describe(error))"])
        }
    }

    /// Past this, a drained queue's index is given back (about 45,000 entries' worth).
    static let releasedQueueIndexBytes: Int64 = 1 << 20

    private func indexBatch(limit: Int) async throws -> ReportIndexBatch? {
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
            let former = try await Self.pairs(
                "SELECT seq, group_id", "report_members", Array(groups), connection, logger)
            let members = former.map(\.key).filter { !freshSeqs.contains($0) }
            let records = try await fresh + Self.reportRecords(connection, seqs: members, logger: logger)
            try await Self.write(
                IndexedGroup.groups(records, node: KeywordReport.indexNodeNumber), replacing: Array(groups),
                members: former, seqs: Dictionary(records.map { ($0.record.recordID, $0.seq) }) { first, _ in first },
                connection, logger)
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

    /// Writes each group's nodes, members and facts in place of those of the `former`
    /// groups (with their `members`): a group keeps a former id where it can
    /// (``ReportIndexChanges``), and only the rows that differ are deleted and inserted, a
    /// table at a time, the rows as column arrays. `seqs` gives the groups' records' places.
    static func write(
        _ groups: [IndexedGroup<Int64>], replacing former: [Int64], members: [Pair], seqs: [String: Int64],
        _ connection: PostgresConnection, _ logger: Logger
    ) async throws {
        var ids = ReportIndexChanges.keptIDs(
            of: groups, formerGroups: Dictionary(members.map { ($0.key, $0.group) }) { first, _ in first })
        let unnumbered = ids.filter { $0 == nil }.count
        if unnumbered > 0 {
            var fresh = try await int64s(
                connection.query(
                    "SELECT nextval('report_groups') FROM generate_series(1, \(unnumbered))", logger: logger)
            ).makeIterator()
            ids = ids.map { $0 ?? fresh.next() }
        }
        let attributionIDs = try await self.attributionIDs(
            ReportIndexRows.attributions(of: groups), connection, logger)
        let rows = ReportIndexRows(groups, ids: ids.map { $0! }) { attributionIDs[$0] ?? 0 }
        let changes = rows.changes(
            members: members,
            nodes: try await pairs("SELECT node, group_id", "report_nodes", former, connection, logger),
            people: try await people(of: former, connection, logger),
            purchases: try await purchases(of: former, connection, logger))
        for (table, column, keys) in [
            ("report_members", "seq", changes.deleted.members), ("report_nodes", "node", changes.deleted.nodes),
        ]
        where !keys.isEmpty {
            _ = try await connection.query(
                "DELETE FROM \(unescaped: table) WHERE \(unescaped: column) = ANY(\(keys)::int8[])", logger: logger)
        }
        for (table, places) in [
            ("report_people", changes.deleted.people), ("report_purchases", changes.deleted.purchases),
        ]
        where !places.isEmpty {
            _ = try await connection.query(
                "DELETE FROM \(unescaped: table) WHERE ctid = ANY(\(places)::text[]::tid[])", logger: logger)
        }
        try await insert(changes.added.members, into: "report_members (seq, group_id)", connection, logger)
        try await insert(changes.added.nodes, into: "report_nodes (node, group_id)", connection, logger)
        let apps = try await appNumbers(
            Set(changes.added.people.map(\.appID) + changes.added.purchases.map(\.appID)), connection, logger)
        try await insert(changes.added.people, seqs: seqs, apps: apps, connection, logger)
        try await insert(changes.added.purchases, apps: apps, connection, logger)
    }

    typealias Pair = ReportIndexRows.Pair

    static func pairs(
        _ select: String, _ table: String, _ groups: [Int64], _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> [Pair] {
        guard !groups.isEmpty else { return [] }
        let rows = try await connection.query(
            "\(unescaped: select) FROM \(unescaped: table) WHERE group_id = ANY(\(groups)::int8[])", logger: logger)
        var pairs: [Pair] = []
        for try await (key, group) in rows.decode((Int64, Int64).self) { pairs.append(Pair(key: key, group: group)) }
        return pairs
    }

    static func insert(_ pairs: [Pair], into table: String, _ connection: PostgresConnection, _ logger: Logger)
        async throws
    {
        guard !pairs.isEmpty else { return }
        _ = try await connection.query(
            """
            INSERT INTO \(unescaped: table)
            SELECT * FROM unnest(\(pairs.map(\.key))::int8[], \(pairs.map(\.group))::int8[])
            """, logger: logger)
    }

    /// The `report_people` rows of `groups`, each with its place (`ctid`) to delete it by.
    /// A row keeps its install's `seq`, not its id (37 bytes a person): a row whose install
    /// is gone reads an empty id, which no row made again has, so it is replaced.
    static func people(of groups: [Int64], _ connection: PostgresConnection, _ logger: Logger) async throws
        -> [(key: String, row: ReportIndexRow.Person)]
    {
        guard !groups.isEmpty else { return [] }
        let rows = try await connection.query(
            """
            SELECT p.ctid::text AS place, p.group_id, a.app_id, p.line_id, p.attribution_id, p.installed_at,
                COALESCE(r.record_id, '') AS record_id, p.attributed, p.country, p.is_test
            FROM report_people p JOIN report_apps a ON a.id = p.app LEFT JOIN records r ON r.seq = p.install_seq
            WHERE p.group_id = ANY(\(groups)::int8[])
            """, logger: logger)
        var people: [(key: String, row: ReportIndexRow.Person)] = []
        for try await row in rows {
            let cells = row.makeRandomAccess()
            let person = ReportIndexRow.Person(
                group: try cells["group_id"].decode(Int64.self), appID: try cells["app_id"].decode(String.self),
                line: try cells["line_id"].decode(Int64.self),
                attribution: try cells["attribution_id"].decode(Int64.self),
                installedAt: try cells["installed_at"].decode(Double.self),
                recordID: try cells["record_id"].decode(String.self),
                attributed: try cells["attributed"].decode(Bool.self),
                country: Int(try cells["country"].decode(Int32.self)), isTest: try cells["is_test"].decode(Bool.self))
            people.append((try cells["place"].decode(String.self), person))
        }
        return people
    }

    /// The `report_purchases` rows of `groups`, each with its place (`ctid`) to delete it by.
    static func purchases(of groups: [Int64], _ connection: PostgresConnection, _ logger: Logger) async throws
        -> [(key: String, row: ReportIndexRow.Purchase)]
    {
        guard !groups.isEmpty else { return [] }
        let rows = try await connection.query(
            """
            SELECT p.ctid::text AS place, p.group_id, a.app_id, p.buyer, p.purchased_at, p.line_id, p.country,
                p.converts, p.refunded, p.revenue, p.currency
            FROM report_purchases p JOIN report_apps a ON a.id = p.app WHERE p.group_id = ANY(\(groups)::int8[])
            """, logger: logger)
        var purchases: [(key: String, row: ReportIndexRow.Purchase)] = []
        for try await row in rows {
            let cells = row.makeRandomAccess()
            let purchase = ReportIndexRow.Purchase(
                group: try cells["group_id"].decode(Int64.self), appID: try cells["app_id"].decode(String.self),
                buyer: try cells["buyer"].decode(Int64.self), time: try cells["purchased_at"].decode(Double.self),
                line: try cells["line_id"].decode(Int64.self), country: Int(try cells["country"].decode(Int32.self)),
                converts: try cells["converts"].decode(Bool.self), refunded: try cells["refunded"].decode(Bool.self),
                revenue: try cells["revenue"].decode(String?.self), currency: try cells["currency"].decode(String?.self)
            )
            purchases.append((try cells["place"].decode(String.self), purchase))
        }
        return purchases
    }

    static func insert(
        _ people: [ReportIndexRow.Person], seqs: [String: Int64], apps: [String: Int32],
        _ connection: PostgresConnection, _ logger: Logger
    ) async throws {
        guard !people.isEmpty else { return }
        _ = try await connection.query(
            """
            INSERT INTO report_people (group_id, app, line_id, attribution_id, installed_at, install_seq,
                attributed, country, is_test)
            SELECT * FROM unnest(\(people.map(\.group))::int8[], \(people.map { apps[$0.appID] ?? 0 })::int4[],
                \(people.map(\.line))::int8[], \(people.map(\.attribution))::int8[],
                \(people.map(\.installedAt))::float8[], \(people.map { seqs[$0.recordID] ?? 0 })::int8[],
                \(people.map(\.attributed))::bool[], \(people.map { Int32($0.country) })::int4[],
                \(people.map(\.isTest))::bool[])
            """, logger: logger)
    }

    /// PostgresNIO binds no array with NULL elements: an absent amount or currency goes as
    /// empty text, with a mask beside it.
    static func insert(
        _ purchases: [ReportIndexRow.Purchase], apps: [String: Int32], _ connection: PostgresConnection,
        _ logger: Logger
    ) async throws {
        guard !purchases.isEmpty else { return }
        _ = try await connection.query(
            """
            INSERT INTO report_purchases (group_id, app, buyer, purchased_at, line_id, country, converts,
                refunded, revenue, currency)
            SELECT g, a, b, t, l, c, cv, r, CASE WHEN hr THEN rv END, CASE WHEN hc THEN cu END
            FROM unnest(\(purchases.map(\.group))::int8[], \(purchases.map { apps[$0.appID] ?? 0 })::int4[],
                \(purchases.map(\.buyer))::int8[], \(purchases.map(\.time))::float8[],
                \(purchases.map(\.line))::int8[], \(purchases.map { Int32($0.country) })::int4[],
                \(purchases.map(\.converts))::bool[], \(purchases.map(\.refunded))::bool[],
                \(purchases.map { $0.revenue ?? "" })::text[], \(purchases.map { $0.revenue != nil })::bool[],
                \(purchases.map { $0.currency ?? "" })::text[], \(purchases.map { $0.currency != nil })::bool[])
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
    /// The number each of `apps` goes by in the report's tables, given one if it has none:
    /// four bytes a row and index entry where the app's id took about a dozen. Only the apps
    /// without one are inserted: an insert that conflicts still takes a number from the
    /// identity, and one a batch would run it out.
    static func appNumbers(_ apps: Set<String>, _ connection: PostgresConnection, _ logger: Logger)
        async throws -> [String: Int32]
    {
        var numbers: [String: Int32] = [:]
        func read(_ apps: [String]) async throws {
            let rows = try await connection.query(
                "SELECT app_id, id FROM report_apps WHERE app_id = ANY(\(apps)::text[])", logger: logger)
            for try await (app, id) in rows.decode((String, Int32).self) { numbers[app] = id }
        }
        try await read(Array(apps))
        let missing = apps.filter { numbers[$0] == nil }.sorted()
        guard !missing.isEmpty else { return numbers }
        _ = try await connection.query(
            "INSERT INTO report_apps (app_id) SELECT * FROM unnest(\(missing)::text[]) ON CONFLICT (app_id) DO NOTHING",
            logger: logger)
        try await read(missing)
        return numbers
    }

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
            WHERE r.seq = ANY(\(seqs)::int8[]) AND f.\(unescaped: BodyField.column("kind")) IN ('install', 'reinstall', 'purchase', 'refund', 'postback')
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
