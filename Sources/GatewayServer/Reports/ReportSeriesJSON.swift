import Foundation
import GatewayCore

/// `GET /v1/reports/daily`: the dashboard's charts as numbers, one entry per day.
struct DailyReportJSON: Encodable {
    struct Day: Encodable {
        let date: String
        let installsAttributed: Int
        let installsOrganic: Int
        /// Per currency code, refunds left out; a currency with no revenue that day is absent.
        let revenue: [String: Decimal]

        enum CodingKeys: String, CodingKey {
            case date, revenue
            case installsAttributed = "installs_attributed"
            case installsOrganic = "installs_organic"
        }
    }

    let days: [Day]

    init(_ series: DailySeries) {
        days = series.days.indices.map { index in
            Day(
                date: series.days[index], installsAttributed: series.attributed[index],
                installsOrganic: series.organic[index],
                revenue: series.revenue.compactMapValues { amounts in amounts[index] == 0 ? nil : amounts[index] })
        }
    }
}

/// `GET /v1/reports/postbacks`: the dashboard's SKAdNetwork section as numbers.
struct PostbackReportJSON: Encodable {
    struct Campaign: Encodable {
        let source: String
        let postbacks: Int
        let winning: Int
        let withValue: Int

        enum CodingKeys: String, CodingKey {
            case source, postbacks, winning
            case withValue = "with_value"
        }
    }

    let total: Int
    /// In the dashboard's order (``SKANReport/byCampaign``).
    let campaigns: [Campaign]
    /// Postbacks per fine value, keyed by the value as text (JSON keys are text).
    let fineValues: [String: Int]
    let coarseValues: [String: Int]
    let events: [String: Int]

    enum CodingKeys: String, CodingKey {
        case total, campaigns, events
        case fineValues = "fine_values"
        case coarseValues = "coarse_values"
    }

    init(_ report: SKANReport) {
        total = report.total
        campaigns = report.byCampaign.map {
            Campaign(source: $0.source, postbacks: $0.postbacks, winning: $0.winning, withValue: $0.withValue)
        }
        fineValues = Dictionary(uniqueKeysWithValues: report.fineValues.map { (String($0.key), $0.value) })
        coarseValues = report.coarseValues
        events = report.events
    }
}
