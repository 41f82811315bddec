import Foundation
import GatewayCore
import Testing

/// SKAdNetwork postbacks summed per campaign and value, apart from the keyword report.
@Suite struct SKANReportTests {
    static func postback(
        _ index: Int, source: String? = "5239", campaign: Int64? = nil, fine: Int? = nil, coarse: String? = nil,
        at offset: TimeInterval = 0
    ) -> AttributionRecord {
        var record = AttributionRecord(
            provider: "skadnetwork", kind: .postback, dedupeKey: "skan:\(index)",
            receivedAt: KeywordReportTests.start.addingTimeInterval(offset), attributed: true)
        record.sourceIdentifier = source
        record.campaignID = campaign
        record.fineValue = fine
        record.coarseValue = coarse
        record.didWin = true
        return record
    }

    @Test func postbacksCountPerSourceAndValueDuplicatesTestsAndForgeriesLeftOut() {
        var report = SKANReport(until: KeywordReportTests.start.addingTimeInterval(60))
        report.add(Self.postback(1, fine: 12))
        report.add(Self.postback(2, fine: 12))
        report.add(Self.postback(3, coarse: "low"))
        // SKAN 3 and before name the campaign by id.
        report.add(Self.postback(4, source: nil, campaign: 17, fine: 3))
        var duplicate = Self.postback(5, fine: 12)
        duplicate.duplicateOf = "x"
        var test = Self.postback(6, fine: 12)
        test.isTest = true
        var forged = Self.postback(7, fine: 12)
        forged.signature = "invalid"
        var lost = Self.postback(8, fine: 1)
        lost.didWin = false
        for record in [duplicate, test, forged, lost, Self.postback(9, fine: 12, at: 120)] { report.add(record) }
        report.add(KeywordReportTests.install("u", keyword: nil))

        #expect(report.total == 5)
        #expect(report.byCampaign.map(\.source) == ["5239", "17"])
        #expect(report.campaigns["5239"]?.postbacks == 4 && report.campaigns["5239"]?.winning == 3)
        #expect(report.fineValues == [12: 2, 3: 1, 1: 1] && report.coarseValues == ["low": 1])
    }
}
