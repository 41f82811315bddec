import Foundation
import Hummingbird
import Synchronization

/// Apple Ads keyword reports on loopback, as ``FakeAppleAds`` serves them: the Platform
/// API v1's `POST /v1/reports/apps/keywords/query` and v5's `POST
/// /api/v5/reports/campaigns/{id}/keywords`. Each checks what the real one requires (the
/// bearer token and context, v1's `campaignId` filter, v5's `selector.orderBy`, a DAILY
/// range) and refuses otherwise, so that a request Apple would refuse fails the test.
final class FakeAppleAdsReports: Sendable {
    /// One keyword's spend on one day.
    struct Day: Sendable {
        var campaign: Int64
        var adGroup: Int64
        var keyword: Int64
        var date: String
        var amount: String
        var currency = "USD"
    }

    let days = Mutex<[Day]>([])
    /// Rows per page, smaller than Apple's 1,000 so that paging is exercised.
    let pageSize = 2
    /// Report requests answered, by API and campaign (`v1:542370539`).
    let asked = Mutex<[String]>([])
    /// Answers every report request `403`, as Apple does to an account the report is not for.
    let refused = Mutex(false)

    func add(_ fake: FakeAppleAds, to router: Router<BasicRequestContext>) {
        router.post("/v1/reports/apps/keywords/query") { request, _ -> Response in
            if request.headers[HTTPFields.Element.Name("X-AP-Context")!] == "adAccountId=\(FakeAppleAds.otherAccountID)"
            {
                return FakeAppleAds.json(
                    200, #"{"result":{"rows":[]},"pagination":{"offset":0,"pageSize":0,"totalCount":0}}"#)
            }
            if let refusal = fake.refusal(request, context: true) { return refusal }
            if self.refused.withLock({ $0 }) {
                return FakeAppleAds.json(403, #"{"error":{"errors":[{"messageCode":"FORBIDDEN"}]}}"#)
            }
            let body = try await request.body.collect(upTo: 1 << 20)
            guard let query = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any],
                let range = query["timeRange"] as? [String: Any], range["granularity"] as? String == "DAILY",
                let start = range["start"] as? String, let end = range["end"] as? String,
                Self.isDay(start), Self.isDay(end), start <= end,
                let filters = query["filters"] as? [[String: Any]],
                let filter = filters.first(where: { $0["field"] as? String == "campaignId" }),
                filter["operator"] as? String == "EQUALS",
                let values = filter["value"] as? [Any], values.count == 1,
                let campaign = Int64("\(values[0])"),
                let pagination = query["pagination"] as? [String: Any],
                let offset = pagination["offset"] as? Int, let size = pagination["pageSize"] as? Int, size <= 1000
            else {
                fake.refuse("v1 keyword report without a DAILY timeRange, a campaignId filter or pagination")
                return FakeAppleAds.json(
                    400, #"{"error":{"code":"INVALID_REQUEST","message":"campaignId filter required","details":[]}}"#)
            }
            self.asked.withLock { $0.append("v1:\(campaign)") }
            let keywords = self.keywords(campaign: campaign, from: start, to: end)
            let page = keywords.dropFirst(offset).prefix(min(size, self.pageSize))
            let rows = page.map { keyword, days in
                let metrics = days.map {
                    #"{"date":"\#($0.date)","localSpend":{"amount":"\#($0.amount)","currency":"\#($0.currency)"},"impressions":100,"taps":5}"#
                }
                return
                    #"{"metadata":{"id":\#(keyword),"text":"keyword \#(keyword)","matchType":"EXACT","adAccountId":\#(FakeAppleAds.adAccountID),"campaignId":\#(campaign),"adGroupId":\#(days[0].adGroup),"status":"ENABLED","deleted":false},"totalMetrics":{"impressions":100},"granularMetrics":[\#(metrics.joined(separator: ","))]}"#
            }
            return FakeAppleAds.json(
                200,
                #"{"result":{"rows":[\#(rows.joined(separator: ","))]},"pagination":{"offset":\#(offset),"pageSize":\#(size),"totalCount":\#(keywords.count)}}"#
            )
        }
        router.post("/api/v5/reports/campaigns/:campaign/keywords") { request, context -> Response in
            if let refusal = fake.refusal(request, context: true, expected: "orgId=\(FakeAppleAds.orgID)") {
                return refusal
            }
            if self.refused.withLock({ $0 }) {
                return FakeAppleAds.json(403, #"{"data":null,"error":{"errors":[{"messageCode":"FORBIDDEN"}]}}"#)
            }
            let campaign = Int64(context.parameters.get("campaign") ?? "") ?? 0
            let body = try await request.body.collect(upTo: 1 << 20)
            guard let query = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any],
                query["granularity"] as? String == "DAILY",
                let start = query["startTime"] as? String, let end = query["endTime"] as? String,
                Self.isDay(start), Self.isDay(end), start <= end,
                let selector = query["selector"] as? [String: Any],
                let orderBy = selector["orderBy"] as? [[String: Any]], !orderBy.isEmpty,
                orderBy.allSatisfy({
                    $0["field"] is String && ["ASCENDING", "DESCENDING"].contains($0["sortOrder"] as? String)
                }),
                let pagination = selector["pagination"] as? [String: Any],
                let offset = pagination["offset"] as? Int, let limit = pagination["limit"] as? Int, limit <= 1000
            else {
                fake.refuse("v5 keyword report without DAILY dates, selector.orderBy or pagination")
                return FakeAppleAds.json(
                    400,
                    #"{"data":null,"pagination":null,"error":{"errors":[{"messageCode":"INVALID_INPUT","message":"orderBy is required","field":"selector.orderBy"}]}}"#
                )
            }
            self.asked.withLock { $0.append("v5:\(campaign)") }
            let keywords = self.keywords(campaign: campaign, from: start, to: end)
            let page = keywords.dropFirst(offset).prefix(min(limit, self.pageSize))
            let rows = page.map { keyword, days in
                let granularity = days.map {
                    #"{"date":"\#($0.date)","impressions":100,"taps":5,"localSpend":{"amount":"\#($0.amount)","currency":"\#($0.currency)"}}"#
                }
                return
                    #"{"other":false,"granularity":[\#(granularity.joined(separator: ","))],"metadata":{"keywordId":\#(keyword),"keyword":"keyword \#(keyword)","keywordStatus":"ACTIVE","matchType":"EXACT","adGroupId":\#(days[0].adGroup),"adGroupName":"group","deleted":false}}"#
            }
            return FakeAppleAds.json(
                200,
                #"{"data":{"reportingDataResponse":{"row":[\#(rows.joined(separator: ","))]}},"pagination":{"totalResults":\#(keywords.count),"startIndex":\#(offset),"itemsPerPage":\#(page.count)},"error":null}"#
            )
        }
    }

    /// The campaign's keywords in id order, each with its days in the range.
    func keywords(campaign: Int64, from: String, to: String) -> [(Int64, [Day])] {
        let matching = days.withLock { $0 }.filter { $0.campaign == campaign && $0.date >= from && $0.date <= to }
        return Dictionary(grouping: matching, by: \.keyword).sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    static func isDay(_ text: String) -> Bool {
        text.wholeMatch(of: /\d{4}-\d{2}-\d{2}/) != nil
    }
}
