import Foundation
import GRDB
import GatewayCore

/// The keyword report summed in SQL from the index's facts (``ReportIndexStore``).
extension SQLiteStore {
    public func indexedReport(_ report: KeywordReport, appID: String?, live: [AttributionRecord], days: DailySeries?)
        async throws -> KeywordReport.Sums
    {
        try await pool.read { db in
            var sums = KeywordReport.Sums(days: days, period: report.hasPeriod)
            // The groups a live record links to are counted here from their records, and
            // left out of the sums below: the live record may change whose install counts.
            let liveGroups = try Self.groups(linkedTo: live, db)
            var linked: [AttributionRecord] = []
            if !live.isEmpty {
                let seqs = try Int64.fetchAll(
                    db, sql: "SELECT seq FROM report_members WHERE group_id IN (SELECT value FROM json_each(?))",
                    arguments: [Self.jsonArray(liveGroups)])
                for chunk in seqs.chunked(into: 5000) {
                    linked += try Self.reportRecords(db, seqs: Self.jsonArray(chunk)).map(\.1)
                }
            }
            report.add(live: live, linked: linked, appID: appID, to: &sums)
            try Self.addIndexedSums(report, appID: appID, leavingOut: liveGroups, to: &sums, db)
            return sums
        }
    }

    static func addIndexedSums(
        _ report: KeywordReport, appID: String?, leavingOut liveGroups: Set<Int64>, to sums: inout KeywordReport.Sums,
        _ db: Database
    ) throws {
        let attributions = try Self.reportAttributions(db)
        guard let appID else {
            // App by app: the indexes lead with the app, and no line, person or buyer is two apps'.
            for app in Set(attributions.values.compactMap(\.appID)).sorted() {
                try addIndexedSums(report, appID: app, leavingOut: liveGroups, to: &sums, db)
            }
            return
        }
        func line(_ id: Int64) -> KeywordReport.Attribution { attributions[id] ?? KeywordReport.Attribution() }
        // Only the filters set are in the statements, so that the indexes serve them.
        var values: [String: (any DatabaseValueConvertible)?] = [:]
        var ofApp = ["app_id = :app"]
        values["app"] = appID
        if !liveGroups.isEmpty {
            ofApp.append("group_id NOT IN (SELECT value FROM json_each(:live))")
            values["live"] = Self.jsonArray(liveGroups)
        }
        var admitted = ofApp
        if let country = report.country {
            admitted.append("country = :country")
            values["country"] = KeywordReport.countryNumber(country)
        }
        if let network = report.network {
            admitted.append("line_id IN (SELECT id FROM report_attributions WHERE network = :network)")
            values["network"] = network
        }
        /// `column` from `since` and before `until`, where given, their values named after it.
        func within(_ column: String, _ since: Date?, _ until: Date?) -> [String] {
            var bounds: [String] = []
            for (bound, time, name) in [(">=", since, "since"), ("<", until, "until")] {
                guard let time else { continue }
                bounds.append("\(column) \(bound) :\(column)_\(name)")
                values["\(column)_\(name)"] = time.timeIntervalSinceReferenceDate
            }
            return bounds
        }
        let people = (admitted + ["is_test = 0"]).joined(separator: " AND ")
        let purchases = (admitted + within("purchased_at", report.purchasesSince, report.purchasesUntil))
            .joined(separator: " AND ")
        let installedInPeriod = ([people] + within("installed_at", report.installsSince, report.installsUntil))
            .joined(separator: " AND ")
        try addNames(appID: appID, of: attributions, leavingOut: liveGroups, to: &sums, db)
        let arguments = StatementArguments(values)
        let installs = try Row.fetchCursor(
            db, sql: "SELECT line_id, COUNT(*) FROM report_people WHERE \(people) GROUP BY line_id",
            arguments: arguments)
        while let row = try installs.next() { sums.add(line(row[0]), installs: row[1]) }
        if report.hasPeriod {
            let recent = try Row.fetchCursor(
                db, sql: "SELECT line_id, COUNT(*) FROM report_people WHERE \(installedInPeriod) GROUP BY line_id",
                arguments: arguments)
            while let row = try recent.next() { sums.add(line(row[0]), installsInPeriod: row[1]) }
        }
        let bought = try Row.fetchCursor(
            db,
            sql: """
                SELECT line_id, refunded, currency, revenue, COUNT(*) FROM report_purchases WHERE \(purchases)
                GROUP BY line_id, refunded, currency, revenue
                """, arguments: arguments)
        while let row = try bought.next() {
            sums.add(line(row[0]), purchases: row[4], refunded: row[1], amount: row[3], currency: row[2])
        }
        let paying = try Row.fetchCursor(
            db,
            sql: """
                SELECT line_id, COUNT(DISTINCT buyer), COUNT(DISTINCT CASE WHEN converts THEN buyer END)
                FROM report_purchases WHERE \(purchases) AND refunded = 0 GROUP BY line_id
                """, arguments: arguments)
        while let row = try paying.next() { sums.add(line(row[0]), payingUsers: row[1], convertedInstalls: row[2]) }
        guard let days = sums.daily?.epochDays else { return }
        // The series' days only, as times: what an index on them can find.
        let epoch = Date.timeIntervalBetween1970AndReferenceDate
        values["from"] = Double(days.lowerBound) * 86400 - epoch
        values["to"] = Double(days.upperBound) * 86400 - epoch
        let inDays = StatementArguments(values)
        func day(_ column: String) -> String {
            let days = "((\(column) + \(Date.timeIntervalBetween1970AndReferenceDate)) / 86400.0)"
            return "(CAST(\(days) AS INTEGER) - (\(days) < CAST(\(days) AS INTEGER)))"
        }
        let daily = try Row.fetchCursor(
            db,
            sql: """
                SELECT \(day("installed_at")), attributed, COUNT(*) FROM report_people
                WHERE \(people) AND installed_at >= :from AND installed_at < :to GROUP BY 1, 2
                """, arguments: inDays)
        while let row = try daily.next() { sums.daily?.addInstalls(row[2], onEpochDay: row[0], attributed: row[1]) }
        let earned = try Row.fetchCursor(
            db,
            sql: """
                SELECT \(day("purchased_at")), currency, revenue, COUNT(*) FROM report_purchases
                WHERE \(purchases) AND refunded = 0 AND revenue IS NOT NULL AND currency IS NOT NULL
                    AND purchased_at >= :from AND purchased_at < :to
                GROUP BY 1, 2, 3
                """, arguments: inDays)
        while let row = try earned.next() { sums.addDailyRevenue(row[3], of: row[2], row[1], onEpochDay: row[0]) }
    }

    public func indexedPostbacks(_ report: SKANReport, appID: String?) async throws -> SKANReport {
        try await pool.read { db in
            var report = report
            let arguments: StatementArguments = [
                "app": appID, "since": report.since?.timeIntervalSinceReferenceDate,
                "until": report.until?.timeIntervalSinceReferenceDate,
            ]
            let counted = """
                (:app IS NULL OR app_id = :app) AND (:since IS NULL OR received_at >= :since)
                    AND (:until IS NULL OR received_at < :until)
                """
            let campaigns = try Row.fetchCursor(
                db,
                sql: """
                    SELECT source, COUNT(*), SUM(won), SUM(has_value) FROM report_postbacks WHERE \(counted)
                    GROUP BY source
                    """, arguments: arguments)
            while let row = try campaigns.next() {
                report.add(source: row[0], postbacks: row[1], winning: row[2], withValue: row[3])
            }
            let fine = try Row.fetchCursor(
                db,
                sql: "SELECT fine, COUNT(*) FROM report_postbacks WHERE \(counted) AND fine IS NOT NULL GROUP BY fine",
                arguments: arguments)
            while let row = try fine.next() { report.add(fineValue: row[0], count: row[1]) }
            let coarse = try Row.fetchCursor(
                db,
                sql:
                    "SELECT coarse, COUNT(*) FROM report_postbacks WHERE \(counted) AND coarse IS NOT NULL GROUP BY coarse",
                arguments: arguments)
            while let row = try coarse.next() { report.add(coarseValue: row[0], count: row[1]) }
            let events = try Row.fetchCursor(
                db,
                sql: """
                    SELECT e.value, COUNT(*) FROM report_postbacks, json_each(report_postbacks.events) e
                    WHERE \(counted) GROUP BY e.value
                    """, arguments: arguments)
            while let row = try events.next() { report.add(event: row[0], count: row[1]) }
            return report
        }
    }

    /// Names each line from the newest install of each attribution that gave it: one
    /// look into the index per line and attribution for the newest time, one for the
    /// installs of that time, the live groups' installs passed over.
    static func addNames(
        appID: String?, of attributions: [Int64: KeywordReport.Attribution], leavingOut liveGroups: Set<Int64>,
        to sums: inout KeywordReport.Sums, _ db: Database
    ) throws {
        let lines = attributions.filter { $0.value.appID != nil && (appID == nil || $0.value.appID == appID) }
        let lineIDs = Dictionary(lines.map { ($0.value, $0.key) }) { first, _ in first }
        let live = liveGroups.isEmpty ? "" : "AND group_id NOT IN (SELECT value FROM json_each(?3))"
        let newest = try db.cachedStatement(
            sql: """
                SELECT installed_at, record_id FROM report_people WHERE line_id = ?1 AND attribution_id = ?2 \(live)
                    AND installed_at = (
                        SELECT installed_at FROM report_people WHERE line_id = ?1 AND attribution_id = ?2 \(live)
                        ORDER BY installed_at DESC LIMIT 1)
                ORDER BY record_id DESC LIMIT 1
                """)
        let apps = Set(lineIDs.keys.compactMap(\.appID))
        for (id, attribution) in attributions where attribution.appID == nil {
            for app in apps {
                let line = attribution.line(app: app)
                guard let lineID = lineIDs[line] else { continue }
                var arguments: StatementArguments = [lineID, id]
                if !liveGroups.isEmpty { arguments += [Self.jsonArray(liveGroups)] }
                guard let install = try Row.fetchOne(newest, arguments: arguments) else { continue }
                sums.name(
                    line, from: attribution, at: Date(timeIntervalSinceReferenceDate: install[0]), recordID: install[1])
            }
        }
    }

    /// Every line and attribution the index names, by id.
    static func reportAttributions(_ db: Database) throws -> [Int64: KeywordReport.Attribution] {
        var attributions: [Int64: KeywordReport.Attribution] = [:]
        let rows = try Row.fetchCursor(db, sql: "SELECT * FROM report_attributions")
        while let row = try rows.next() {
            attributions[row["id"]] = KeywordReport.Attribution(
                network: row["network"], campaignID: row["campaign_id"], campaign: row["campaign"],
                adGroupID: row["ad_group_id"], adGroup: row["ad_group"], keywordID: row["keyword_id"],
                keyword: row["keyword"], matchType: row["match_type"], appID: row["app_id"])
        }
        return attributions
    }
}
