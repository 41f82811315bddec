import Foundation
import GRDB
import GatewayCore

/// The keyword report summed in SQL from the index's facts (``ReportIndexStore``).
extension SQLiteStore {
    public func indexedReport(_ report: KeywordReport, appID: String?, live: [AttributionRecord], days: DailySeries?)
        async throws -> KeywordReport.Sums
    {
        try await pool.read { db in
            var sums = KeywordReport.Sums(days: days)
            // The groups a live record links to are counted here from their records, and
            // left out of the sums below: the live record may change whose install counts.
            let liveGroups = try Self.groups(linkedTo: live, db)
            if !live.isEmpty {
                var counted = report
                let seqs = try Int64.fetchAll(
                    db, sql: "SELECT seq FROM report_members WHERE group_id IN (SELECT value FROM json_each(?))",
                    arguments: [Self.jsonArray(liveGroups)])
                for chunk in seqs.chunked(into: 5000) {
                    for (_, record) in try Self.reportRecords(db, seqs: Self.jsonArray(chunk))
                    where appID == nil || record.appID == appID {
                        counted.add(record)
                    }
                }
                for record in live { counted.add(record) }
                counted.add(to: &sums)
            }
            try Self.addIndexedSums(report, appID: appID, leavingOut: liveGroups, to: &sums, db)
            return sums
        }
    }

    static func addIndexedSums(
        _ report: KeywordReport, appID: String?, leavingOut liveGroups: Set<Int64>, to sums: inout KeywordReport.Sums,
        _ db: Database
    ) throws {
        let attributions = try Self.reportAttributions(db)
        func line(_ id: Int64) -> KeywordReport.Attribution { attributions[id] ?? KeywordReport.Attribution() }
        let arguments: StatementArguments = [
            "app": appID, "live": Self.jsonArray(liveGroups), "network": report.network,
            "country": report.country.map { KeywordReport.countryNumber($0) },
            "since": report.purchasesSince?.timeIntervalSinceReferenceDate,
            "until": report.purchasesUntil?.timeIntervalSinceReferenceDate,
        ]
        let ofApp = "(:app IS NULL OR app_id = :app) AND group_id NOT IN (SELECT value FROM json_each(:live))"
        let admitted = """
            \(ofApp) AND (:country IS NULL OR country = :country)
                AND (:network IS NULL OR line_id IN (SELECT id FROM report_attributions WHERE network = :network))
            """
        let people = "is_test = 0 AND \(admitted)"
        let purchases = """
            \(admitted) AND (:since IS NULL OR purchased_at >= :since) AND (:until IS NULL OR purchased_at < :until)
            """
        // Every install names its line, a tester's too, whatever the filters.
        let named = try Row.fetchCursor(
            db,
            sql: """
                SELECT line_id, attribution_id, MAX(stamp) FROM report_people WHERE \(ofApp)
                GROUP BY line_id, attribution_id
                """, arguments: arguments)
        while let row = try named.next() {
            sums.name(line(row[0]), from: line(row[1]), stamp: row[2])
        }
        let installs = try Row.fetchCursor(
            db, sql: "SELECT line_id, COUNT(*) FROM report_people WHERE \(people) GROUP BY line_id",
            arguments: arguments)
        while let row = try installs.next() { sums.add(line(row[0]), installs: row[1]) }
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
        guard sums.daily != nil else { return }
        func day(_ column: String) -> String {
            let days = "((\(column) + \(Date.timeIntervalBetween1970AndReferenceDate)) / 86400.0)"
            return "(CAST(\(days) AS INTEGER) - (\(days) < CAST(\(days) AS INTEGER)))"
        }
        let daily = try Row.fetchCursor(
            db,
            sql: """
                SELECT \(day("installed_at")), attributed, COUNT(*) FROM report_people WHERE \(people)
                GROUP BY 1, 2
                """, arguments: arguments)
        while let row = try daily.next() { sums.daily?.addInstalls(row[2], onEpochDay: row[0], attributed: row[1]) }
        let earned = try Row.fetchCursor(
            db,
            sql: """
                SELECT \(day("purchased_at")), currency, revenue, COUNT(*) FROM report_purchases
                WHERE \(purchases) AND refunded = 0 AND revenue IS NOT NULL AND currency IS NOT NULL
                GROUP BY 1, 2, 3
                """, arguments: arguments)
        while let row = try earned.next() { sums.addDailyRevenue(row[3], of: row[2], row[1], onEpochDay: row[0]) }
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
