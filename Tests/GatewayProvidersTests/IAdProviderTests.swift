import Foundation
import GatewayCore
import GatewayProviders
import Testing

/// The iAd normaliser on payloads shaped as devices delivered them.
@Suite struct IAdProviderTests {
    let provider = IAdProvider()
    let receivedAt = Date(timeIntervalSince1970: 1_700_000_000)

    func normalize(_ json: String) throws -> AttributionRecord {
        let records = try provider.normalize(IngestPayload(body: Data(json.utf8), receivedAt: receivedAt))
        #expect(records.count == 1)
        return try #require(records.first)
    }

    func error(_ json: String) -> GatewayError? {
        do {
            _ = try provider.normalize(IngestPayload(body: Data(json.utf8), receivedAt: receivedAt))
            return nil
        } catch {
            return error as? GatewayError
        }
    }

    @Test func stringValuesAsDevicesSendThem() throws {
        let record = try normalize(
            """
            {"app_id": 1234567890, "app_user_id": "u-1", "att_status": 3,
             "idfa": "6D92078A-8246-4BA4-AE5B-76104861E7DC", "idfv": "F1A2",
             "Version3.1": {"iad-attribution": "true", "iad-org-id": "40669820", "iad-campaign-id": "15292426",
              "iad-campaign-name": "Brand", "iad-adgroup-id": "15307675", "iad-adgroup-name": "Exact",
              "iad-keyword-id": "15307699", "iad-keyword": "calm", "iad-keyword-matchtype": "Broad",
              "iad-creativeset-id": "0", "iad-country-or-region": "GB", "iad-conversion-type": "newdownload",
              "iad-click-date": "2020-08-04T17:18:07.123Z", "iad-purchase-date": "2020-08-04T17:19:41Z",
              "iad-lineitem-id": "999", "some-future-key": [1, 2]}}
            """)
        #expect(record.provider == "iad")
        #expect(record.appID == "1234567890")
        #expect(record.attributed)
        #expect(record.kind == .install)
        #expect(record.resolution == .resolved)
        #expect(record.orgID == 40_669_820)
        #expect(record.campaignID == 15_292_426)
        #expect(record.adGroupID == 15_307_675)
        #expect(record.adGroupName == "Exact")
        #expect(record.keywordID == 15_307_699)
        #expect(record.keywordMatchType == "Broad")
        #expect(record.creativeSetID == 0)
        #expect(record.countryOrRegion == "GB")
        #expect(record.conversionType == "Download")
        #expect(abs((record.clickDate?.timeIntervalSince1970 ?? 0) - 1_596_561_487.123) < 0.000_001)
        #expect(record.purchaseDate == Date(timeIntervalSince1970: 1_596_561_581))
        #expect(record.idfa == "6D92078A-8246-4BA4-AE5B-76104861E7DC")
        #expect(record.attStatus == 3)
        #expect(!record.isTest)
        #expect(record.dedupeKey == "iad:1234567890:u-1")
        #expect(record.receivedAt == receivedAt)
        #expect(record.raw?["Version3.1"]?["some-future-key"] == .array([.integer(1), .integer(2)]))
    }

    @Test func nativeTypesLegacyLineItemsAndRedownloads() throws {
        let record = try normalize(
            """
            {"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": true, "iad-campaign-id": 42,
             "iad-lineitem-id": "77", "iad-lineitem-name": "Line", "iad-conversion-type": "redownload"}}
            """)
        #expect(record.campaignID == 42)
        #expect(record.adGroupID == 77)
        #expect(record.adGroupName == "Line")
        #expect(record.kind == .reinstall)
        #expect(record.conversionType == "Redownload")
    }

    @Test func organicAnswersCarryNoCampaign() throws {
        let record = try normalize(
            """
            {"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "false", "iad-campaign-id": "5"}}
            """)
        #expect(!record.attributed)
        #expect(record.campaignID == nil)
        #expect(record.keyword == nil)
    }

    @Test func appleTestPayloadsAreMarked() throws {
        let record = try normalize(
            """
            {"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true",
             "iad-org-id": "1234567890", "iad-campaign-id": "1234567890", "iad-keyword": "Keyword"}}
            """)
        #expect(record.isTest)
    }

    @Test func theIDFAIsKeptOnlyWithConsent() throws {
        let body = { (status: Int, idfa: String) in
            #"{"app_id": "1", "app_user_id": "u", "att_status": \#(status), "idfa": "\#(idfa)", "Version3.1": {"iad-attribution": "false"}}"#
        }
        #expect(try normalize(body(2, "6D92078A-8246-4BA4-AE5B-76104861E7DC")).idfa == nil)
        #expect(try normalize(body(3, "00000000-0000-0000-0000-000000000000")).idfa == nil)
        #expect(try normalize(body(3, "6D92078A-8246-4BA4-AE5B-76104861E7DC")).idfa != nil)
    }

    @Test(arguments: [
        ("", "malformed_json", nil),
        ("{\"app_id\": ", "malformed_json", nil),
        ("[]", "malformed_json", nil),
        (#"{"app_user_id": "u", "Version3.1": {}}"#, "missing_field", "app_id"),
        (#"{"app_id": "1", "Version3.1": {}}"#, "missing_field", "app_user_id"),
        (#"{"app_id": "1", "app_user_id": "u"}"#, "missing_field", "Version3.1"),
        (#"{"app_id": "1", "app_user_id": "u", "Version3.1": {}}"#, "missing_field", "Version3.1.iad-attribution"),
        (#"{"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "maybe"}}"#, "invalid_field", "Version3.1.iad-attribution"),
        (#"{"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true", "iad-campaign-id": "12a"}}"#, "invalid_field", "Version3.1.iad-campaign-id"),
        (#"{"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true", "iad-click-date": "yesterday"}}"#, "invalid_field", "Version3.1.iad-click-date"),
        (#"{"app_id": "1", "app_user_id": ["u"], "Version3.1": {}}"#, "invalid_field", "app_user_id"),
        (#"{"app_id": "1", "app_user_id": "u", "att_status": 7, "Version3.1": {}}"#, "invalid_field", "att_status"),
    ] as [(String, String, String?)])
    func unreadablePayloadsNameTheField(body: String, code: String, field: String?) {
        let error = error(body)
        #expect(error?.code.name == code)
        #expect(error?.field == field)
    }

    @Test func isoDatesInEveryShapeAppleUses() {
        #expect(ISO8601.parse("2024-10-08T17:17Z") == Date(timeIntervalSince1970: 1_728_407_820))
        #expect(ISO8601.parse("2020-08-04T17:18:07Z") == Date(timeIntervalSince1970: 1_596_561_487))
        #expect(ISO8601.parse("2020-08-04T19:18:07+02:00") == Date(timeIntervalSince1970: 1_596_561_487))
        #expect(ISO8601.parse("2020-08-04T17:18:07.5Z") == Date(timeIntervalSince1970: 1_596_561_487.5))
        #expect(ISO8601.parse("2024-02-31T00:00:00Z") == nil)
        #expect(ISO8601.parse("2020-08-04") == nil)
        #expect(ISO8601.parse("2020-08-04T17:18:07") == nil)
        #expect(ISO8601.format(Date(timeIntervalSince1970: 1_596_561_487.25)) == "2020-08-04T17:18:07.250Z")
        #expect(ISO8601.format(Date(timeIntervalSince1970: 1_596_561_487)) == "2020-08-04T17:18:07Z")
        #expect(ISO8601.parse("2024-02-29T00:00:00Z") != nil)
        #expect(ISO8601.parse("2100-02-29T00:00:00Z") == nil)
    }

    @Test func formatAgreesWithFoundationAndRoundTripsAcrossCenturies() {
        let foundation = ISO8601DateFormatter()
        // Every 7,919,999 seconds (~92 days, prime-ish) from 1901 to 2099: all months, leap years, eras.
        for seconds in stride(from: -2_177_452_800, to: 4_102_444_800, by: 7_919_999) {
            let date = Date(timeIntervalSince1970: TimeInterval(seconds))
            let text = ISO8601.format(date)
            #expect(text == foundation.string(from: date))
            #expect(ISO8601.parse(text) == date)
        }
    }
}
