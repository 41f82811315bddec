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
            var sums = KeywordReport.Sums(days: days, period: report.hasPeriod)
            // The groups a live record links to are counted here from their records, and
            // left out of the sums below: the live record may change whose install counts.
            let liveGroups = try await Self.groups(linkedTo: live, connection, logger)
            var linked: [AttributionRecord] = []
            if !live.isEmpty {
                let seqs = try await Self.int64s(
                    connection.query(
                        "SELECT seq FROM report_members WHERE group_id = ANY(\(liveGroups)::int8[])", logger: logger))
                linked = try await Self.reportRecords(connection, seqs: seqs, logger: logger).map(\.record)
            }
            report.add(live: live, linked: linked, appID: appID, to: &sums)
            try await Self.addIndexedSums(report, appID: appID, leavingOut: liveGroups, to: &sums, connection, logger)
            return sums
        }
    }

    public func indexedPostbacks(_ report: SKANReport, appID: String?) async throws -> SKANReport {
        try await transaction { [logger] connection in
            _ = try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: logger)
            var report = report
            var counted = SQLConditions()
            if let appID { counted.add("app_id = ?::text", appID) }
            if let since = report.since {
                counted.add("received_at >= ?::float8", since.timeIntervalSinceReferenceDate)
            }
            if let until = report.until { counted.add("received_at < ?::float8", until.timeIntervalSinceReferenceDate) }
            func rows(_ head: String, _ tail: String) async throws -> PostgresRowSequence {
                try await connection.query(counted.query(head, tail), logger: logger)
            }
            let campaigns = try await rows(
                """
                SELECT source, COUNT(*), COUNT(*) FILTER (WHERE won), COUNT(*) FILTER (WHERE has_value)
                FROM report_postbacks WHERE
                """, "GROUP BY source")
            for try await (source, postbacks, winning, withValue) in campaigns.decode(
                (String, Int64, Int64, Int64).self)
            {
                report.add(source: source, postbacks: Int(postbacks), winning: Int(winning), withValue: Int(withValue))
            }
            let fine = try await rows(
                "SELECT fine, COUNT(*) FROM report_postbacks WHERE fine IS NOT NULL AND", "GROUP BY fine")
            for try await (value, count) in fine.decode((Int32, Int64).self) {
                report.add(fineValue: Int(value), count: Int(count))
            }
            let coarse = try await rows(
                "SELECT coarse, COUNT(*) FROM report_postbacks WHERE coarse IS NOT NULL AND", "GROUP BY coarse")
            for try await (value, count) in coarse.decode((String, Int64).self) {
                report.add(coarseValue: value, count: Int(count))
            }
            let events = try await rows(
                "SELECT e, COUNT(*) FROM report_postbacks, jsonb_array_elements_text(events::jsonb) AS e WHERE",
                "GROUP BY e")
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
        // App by app: the indexes lead with the app, and no line, person or buyer is two apps'.
        for app in appID.map({ [$0] }) ?? Set(attributions.values.compactMap(\.appID)).sorted() {
            try await addNames(appID: app, of: attributions, leavingOut: live, to: &sums, connection, logger)
            try await addSums(report, appID: app, of: attributions, leavingOut: live, to: &sums, connection, logger)
        }
    }

    /// Names each line from the newest install of each attribution that gave it: one look
    /// into the index per line and attribution for the newest time, one for the installs
    /// of that time, the live groups' installs passed over. (Asked in one `ORDER BY`, the
    /// planner sorts every install of the line.)
    static func addNames(
        appID: String, of attributions: [Int64: KeywordReport.Attribution], leavingOut live: [Int64],
        to sums: inout KeywordReport.Sums, _ connection: PostgresConnection, _ logger: Logger
    ) async throws {
        var lineIDs: [KeywordReport.Attribution: Int64] = [:]
        for (id, line) in attributions where line.appID == appID { lineIDs[line] = id }
        var pairs: (lines: [Int64], attributions: [Int64]) = ([], [])
        for (id, attribution) in attributions where attribution.appID == nil {
            guard let lineID = lineIDs[attribution.line(app: appID)] else { continue }
            pairs.lines.append(lineID)
            pairs.attributions.append(id)
        }
        guard !pairs.lines.isEmpty else { return }
        let newest = try await connection.query(
            """
            SELECT pair.l, pair.a, newest.installed_at, newest.record_id
            FROM unnest(\(pairs.lines)::int8[], \(pairs.attributions)::int8[]) AS pair(l, a)
            CROSS JOIN LATERAL (
                SELECT p.installed_at, r.record_id FROM report_people p JOIN records r ON r.seq = p.install_seq
                WHERE p.line_id = pair.l AND p.attribution_id = pair.a AND NOT (p.group_id = ANY(\(live)::int8[]))
                    AND p.installed_at = (
                        SELECT q.installed_at FROM report_people q
                        WHERE q.line_id = pair.l AND q.attribution_id = pair.a
                            AND NOT (q.group_id = ANY(\(live)::int8[]))
                        ORDER BY q.installed_at DESC LIMIT 1)
                ORDER BY r.record_id COLLATE "C" DESC LIMIT 1) AS newest
            """, logger: logger)
        for try await (lineID, id, installedAt, recordID) in newest.decode((Int64, Int64, Double, String).self) {
            guard let line = attributions[lineID], let attribution = attributions[id] else { continue }
            sums.name(
                line, from: attribution, at: Date(timeIntervalSinceReferenceDate: installedAt), recordID: recordID)
        }
    }

    /// Adds the counts of `appID`'s lines that the report's filters admit.
    static func addSums(
        _ report: KeywordReport, appID: String, of attributions: [Int64: KeywordReport.Attribution],
        leavingOut live: [Int64], to sums: inout KeywordReport.Sums, _ connection: PostgresConnection,
        _ logger: Logger
    ) async throws {
        func line(_ id: Int64) -> KeywordReport.Attribution { attributions[id] ?? KeywordReport.Attribution() }
        // Only the filters set are in the statements, so that the indexes serve them.
        var admitted = SQLConditions()
        admitted.add("app = (SELECT id FROM report_apps WHERE app_id = ?::text)", appID)
        if !live.isEmpty { admitted.add("NOT (group_id = ANY(?::int8[]))", live) }
        if let country = report.country {
            admitted.add("country = ?::int4", Int32(KeywordReport.countryNumber(country)))
        }
        if let network = report.network {
            admitted.add("line_id IN (SELECT id FROM report_attributions WHERE network = ?::text)", network)
        }
        var people = admitted
        people.add("NOT is_test")
        var purchases = admitted
        if let since = report.purchasesSince {
            purchases.add("purchased_at >= ?::float8", since.timeIntervalSinceReferenceDate)
        }
        if let until = report.purchasesUntil {
            purchases.add("purchased_at < ?::float8", until.timeIntervalSinceReferenceDate)
        }
        var paid = purchases
        paid.add("NOT refunded")
        let installs = try await connection.query(
            people.query("SELECT line_id, COUNT(*) FROM report_people WHERE", "GROUP BY line_id"), logger: logger)
        for try await (lineID, count) in installs.decode((Int64, Int64).self) {
            sums.add(line(lineID), installs: Int(count))
        }
        if report.hasPeriod {
            var inPeriod = people
            if let since = report.installsSince {
                inPeriod.add("installed_at >= ?::float8", since.timeIntervalSinceReferenceDate)
            }
            if let until = report.installsUntil {
                inPeriod.add("installed_at < ?::float8", until.timeIntervalSinceReferenceDate)
            }
            let recent = try await connection.query(
                inPeriod.query("SELECT line_id, COUNT(*) FROM report_people WHERE", "GROUP BY line_id"), logger: logger)
            for try await (lineID, count) in recent.decode((Int64, Int64).self) {
                sums.add(line(lineID), installsInPeriod: Int(count))
            }
        }
        let bought = try await connection.query(
            purchases.query(
                "SELECT line_id, refunded, currency, revenue, COUNT(*) FROM report_purchases WHERE",
                "GROUP BY line_id, refunded, currency, revenue"), logger: logger)
        for try await (lineID, refunded, currency, amount, count) in bought.decode(
            (Int64, Bool, String?, String?, Int64).self)
        {
            sums.add(line(lineID), purchases: Int(count), refunded: refunded, amount: amount, currency: currency)
        }
        let paying = try await connection.query(
            paid.query(
                """
                SELECT line_id, COUNT(DISTINCT buyer), COUNT(DISTINCT CASE WHEN converts THEN buyer END)
                FROM report_purchases WHERE
                """, "GROUP BY line_id"), logger: logger)
        for try await (lineID, buyers, converted) in paying.decode((Int64, Int64, Int64).self) {
            sums.add(line(lineID), payingUsers: Int(buyers), convertedInstalls: Int(converted))
        }
        guard let days = sums.daily?.epochDays else { return }
        // The series' days only, as times: what an index on them can find.
        let epoch = Date.timeIntervalBetween1970AndReferenceDate
        let (from, to) = (Double(days.lowerBound) * 86400 - epoch, Double(days.upperBound) * 86400 - epoch)
        people.add("installed_at >= ?::float8", from)
        people.add("installed_at < ?::float8", to)
        paid.add("purchased_at >= ?::float8", from)
        paid.add("purchased_at < ?::float8", to)
        paid.add("revenue IS NOT NULL AND currency IS NOT NULL")
        func day(_ column: String) -> String { "floor((\(column) + \(epoch)) / 86400)::int8" }
        let daily = try await connection.query(
            people.query(
                "SELECT \(day("installed_at")), attributed, COUNT(*) FROM report_people WHERE", "GROUP BY 1, 2"),
            logger: logger)
        for try await (day, attributed, count) in daily.decode((Int64, Bool, Int64).self) {
            sums.daily?.addInstalls(Int(count), onEpochDay: Int(day), attributed: attributed)
        }
        let earned = try await connection.query(
            paid.query(
                "SELECT \(day("purchased_at")), currency, revenue, COUNT(*) FROM report_purchases WHERE",
                "GROUP BY 1, 2, 3"), logger: logger)
        for try await (day, currency, amount, count) in earned.decode((Int64, String, String, Int64).self) {
            sums.addDailyRevenue(Int(count), of: amount, currency, onEpochDay: Int(day))
        }
    }
}

/// The conditions of a statement's `WHERE`, each with the value its `?` stands for: a
/// statement names only the filters that are set, and binds only their values.
struct SQLConditions {
    private var conditions: [String] = []
    private var binds = PostgresBindings()

    mutating func add(_ condition: String, _ value: some PostgresDynamicTypeEncodable) {
        binds.append(value)
        conditions.append(condition.replacingOccurrences(of: "?", with: "$\(binds.count)"))
    }

    mutating func add(_ condition: String) { conditions.append(condition) }

    /// `head`, the conditions, then `tail`.
    func query(_ head: String, _ tail: String) -> PostgresQuery {
        let conditions = conditions.isEmpty ? "TRUE" : conditions.joined(separator: " AND ")
        return PostgresQuery(unsafeSQL: "\(head) \(conditions) \(tail)", binds: binds)
    }
}
