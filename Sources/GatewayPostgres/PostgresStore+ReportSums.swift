import Foundation
import GatewayCore
import PostgresNIO

/// The keyword report summed in SQL from the index's facts (``ReportIndexStore``), in one
/// snapshot of the database: a batch of the indexer committing meanwhile is in all of the
/// sums or in none.
extension PostgresStore {
    public func indexedReport(_ report: KeywordReport, appID: String?, live: [AttributionRecord], days: DailySeries?)
        async throws -> KeywordReport.Sums
    {
        try await transaction { [logger] connection in
            _ = try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: logger)
            var sums = KeywordReport.Sums(days: days)
            // The groups a live record links to are counted here from their records, and
            // left out of the sums below: the live record may change whose install counts.
            let liveNodes = Set(
                live.flatMap { KeywordReport.indexNodes(of: $0) ?? [] }.map(KeywordReport.indexNodeNumber))
            let liveGroups = try await Self.int64s(
                connection.query(
                    "SELECT DISTINCT group_id FROM report_nodes WHERE node = ANY(\(Array(liveNodes))::int8[])",
                    logger: logger))
            if !live.isEmpty {
                var counted = report
                let seqs = try await Self.int64s(
                    connection.query(
                        "SELECT seq FROM report_members WHERE group_id = ANY(\(liveGroups)::int8[])", logger: logger))
                for (_, record) in try await Self.reportRecords(connection, seqs: seqs, logger: logger)
                where appID == nil || record.appID == appID {
                    counted.add(record)
                }
                for record in live { counted.add(record) }
                counted.add(to: &sums)
            }
            try await Self.addIndexedSums(report, appID: appID, leavingOut: liveGroups, to: &sums, connection, logger)
            return sums
        }
    }

    public func indexedPostbacks(_ report: SKANReport, appID: String?) async throws -> SKANReport {
        try await transaction { [logger] connection in
            _ = try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: logger)
            var report = report
            var binds = PostgresBindings()
            binds.append(appID)
            binds.append(report.since?.timeIntervalSinceReferenceDate)
            binds.append(report.until?.timeIntervalSinceReferenceDate)
            func rows(_ sql: String) async throws -> PostgresRowSequence {
                let counted = """
                    WITH p AS (SELECT $1::text AS of_app, $2::float8 AS since, $3::float8 AS until),
                    counted AS (
                        SELECT b.* FROM report_postbacks b, p WHERE (p.of_app IS NULL OR b.app_id = p.of_app)
                            AND (p.since IS NULL OR b.received_at >= p.since)
                            AND (p.until IS NULL OR b.received_at < p.until))
                    """
                return try await connection.query(
                    PostgresQuery(unsafeSQL: counted + " " + sql, binds: binds), logger: logger)
            }
            let campaigns = try await rows(
                """
                SELECT source, COUNT(*), COUNT(*) FILTER (WHERE won), COUNT(*) FILTER (WHERE has_value)
                FROM counted GROUP BY source
                """)
            for try await (source, postbacks, winning, withValue) in campaigns.decode(
                (String, Int64, Int64, Int64).self)
            {
                report.add(source: source, postbacks: Int(postbacks), winning: Int(winning), withValue: Int(withValue))
            }
            let fine = try await rows("SELECT fine, COUNT(*) FROM counted WHERE fine IS NOT NULL GROUP BY fine")
            for try await (value, count) in fine.decode((Int32, Int64).self) {
                report.add(fineValue: Int(value), count: Int(count))
            }
            let coarse = try await rows(
                "SELECT coarse, COUNT(*) FROM counted WHERE coarse IS NOT NULL GROUP BY coarse")
            for try await (value, count) in coarse.decode((String, Int64).self) {
                report.add(coarseValue: value, count: Int(count))
            }
            let events = try await rows(
                "SELECT e, COUNT(*) FROM counted, jsonb_array_elements_text(counted.events::jsonb) AS e GROUP BY e")
            for try await (event, count) in events.decode((String, Int64).self) {
                report.add(event: event, count: Int(count))
            }
            return report
        }
    }

    static func addIndexedSums(
        _ report: KeywordReport, appID: String?, leavingOut live: [Int64], to sums: inout KeywordReport.Sums,
        _ connection: PostgresConnection, _ logger: Logger
    ) async throws {
        var attributions: [Int64: KeywordReport.Attribution] = [:]
        let known = try await connection.query(
            """
            SELECT id, app_id, network, campaign_id, campaign, ad_group_id, ad_group, keyword_id, keyword, match_type
            FROM report_attributions
            """, logger: logger)
        for try await row in known.decode(
            (Int64, String?, String?, Int64?, String?, Int64?, String?, Int64?, String?, String?).self)
        {
            attributions[row.0] = KeywordReport.Attribution(
                network: row.2, campaignID: row.3, campaign: row.4, adGroupID: row.5, adGroup: row.6, keywordID: row.7,
                keyword: row.8, matchType: row.9, appID: row.1)
        }
        func line(_ id: Int64) -> KeywordReport.Attribution { attributions[id] ?? KeywordReport.Attribution() }
        // Every statement gets the same parameters: $1 app, $2 the live groups, $3 country,
        // $4 network, $5 and $6 the purchases' period.
        var binds = PostgresBindings()
        binds.append(appID)
        binds.append(live)
        binds.append(report.country.map { Int32(KeywordReport.countryNumber($0)) })
        binds.append(report.network)
        binds.append(report.purchasesSince?.timeIntervalSinceReferenceDate)
        binds.append(report.purchasesUntil?.timeIntervalSinceReferenceDate)
        // A statement that left a parameter unused could not tell its type: each names them
        // all once, as the columns of `p`.
        func rows(_ sql: String) async throws -> PostgresRowSequence {
            let parameters = """
                WITH p AS (SELECT $1::text AS of_app, $2::int8[] AS live, $3::int4 AS of_country,
                    $4::text AS of_network, $5::float8 AS since, $6::float8 AS until)
                """
            return try await connection.query(
                PostgresQuery(unsafeSQL: parameters + " " + sql, binds: binds), logger: logger)
        }
        let ofApp = "(p.of_app IS NULL OR app_id = p.of_app) AND NOT (group_id = ANY(p.live))"
        let admitted = """
            \(ofApp) AND (p.of_country IS NULL OR country = p.of_country)
                AND (p.of_network IS NULL OR line_id IN (SELECT id FROM report_attributions WHERE network = p.of_network))
            """
        let people = "\(admitted) AND NOT is_test"
        let purchases = """
            \(admitted) AND (p.since IS NULL OR purchased_at >= p.since) AND (p.until IS NULL OR purchased_at < p.until)
            """
        func day(_ column: String) -> String {
            "floor((\(column) + \(Date.timeIntervalBetween1970AndReferenceDate)) / 86400)::int8"
        }
        // Every install names its line, a tester's too, whatever the filters.
        let named = try await rows(
            "SELECT line_id, attribution_id, MAX(stamp) FROM report_people, p WHERE \(ofApp) GROUP BY line_id, attribution_id"
        )
        for try await (lineID, attribution, stamp) in named.decode((Int64, Int64, String).self) {
            sums.name(line(lineID), from: line(attribution), stamp: stamp)
        }
        let installs = try await rows("SELECT line_id, COUNT(*) FROM report_people, p WHERE \(people) GROUP BY line_id")
        for try await (lineID, count) in installs.decode((Int64, Int64).self) {
            sums.add(line(lineID), installs: Int(count))
        }
        let bought = try await rows(
            """
            SELECT line_id, refunded, currency, revenue, COUNT(*) FROM report_purchases, p WHERE \(purchases)
            GROUP BY line_id, refunded, currency, revenue
            """)
        for try await (lineID, refunded, currency, amount, count) in bought.decode(
            (Int64, Bool, String?, String?, Int64).self)
        {
            sums.add(line(lineID), purchases: Int(count), refunded: refunded, amount: amount, currency: currency)
        }
        let paying = try await rows(
            """
            SELECT line_id, COUNT(DISTINCT buyer), COUNT(DISTINCT CASE WHEN converts THEN buyer END)
            FROM report_purchases, p WHERE \(purchases) AND NOT refunded GROUP BY line_id
            """)
        for try await (lineID, buyers, converted) in paying.decode((Int64, Int64, Int64).self) {
            sums.add(line(lineID), payingUsers: Int(buyers), convertedInstalls: Int(converted))
        }
        guard sums.daily != nil else { return }
        let daily = try await rows(
            "SELECT \(day("installed_at")), attributed, COUNT(*) FROM report_people, p WHERE \(people) GROUP BY 1, 2")
        for try await (day, attributed, count) in daily.decode((Int64, Bool, Int64).self) {
            sums.daily?.addInstalls(Int(count), onEpochDay: Int(day), attributed: attributed)
        }
        let earned = try await rows(
            """
            SELECT \(day("purchased_at")), currency, revenue, COUNT(*) FROM report_purchases, p
            WHERE \(purchases) AND NOT refunded AND revenue IS NOT NULL AND currency IS NOT NULL GROUP BY 1, 2, 3
            """)
        for try await (day, currency, amount, count) in earned.decode((Int64, String, String, Int64).self) {
            sums.addDailyRevenue(Int(count), of: amount, currency, onEpochDay: Int(day))
        }
    }
}
