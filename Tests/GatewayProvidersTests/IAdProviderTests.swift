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

    /// A NUL anywhere (an unknown field, a nested one, a key) is refused naming the field:
    /// stored, the payload would be refused by the `postgres` sink's `jsonb` for good.
    @Test(arguments: [
        (#"{"app_id":"1","extra":"a\u0000b","Version3.1":{"iad-attribution":"false"}}"#, "extra"),
        (#"{"app_id":"1","Version3.1":{"iad-attribution":"false","future":["x","\u0000"]}}"#, "Version3.1.future[1]"),
        (#"{"app_id":"1","k\u0000":1,"Version3.1":{"iad-attribution":"false"}}"#, #"k\u0000"#),
    ])
    func aNULAnywhereIsRefusedNamingItsField(json: String, field: String) {
        let refusal = error(json)
        #expect(refusal?.code == .invalidField && refusal?.field == field, "\(String(describing: refusal))")
    }

    /// A number JSON allows but a double cannot hold is valid JSON: refused naming its field,
    /// not called malformed.
    @Test(arguments: [
        (#"{"app_id":"1","extra":1e309,"Version3.1":{"iad-attribution":"false"}}"#, "extra"),
        (#"{"app_id":"1","Version3.1":{"iad-attribution":"false","future":[1,-1e400]}}"#, "Version3.1.future[1]"),
    ])
    func aNumberPastADoubleIsRefusedNamingItsField(json: String, field: String) {
        let refusal = error(json)
        #expect(refusal?.code == .invalidField && refusal?.field == field, "\(String(describing: refusal))")
    }

    @Test func stringValuesAsDevicesSendThem() throws {
        let record = try normalize(
            """
            {"app_id": 1234567890, "app_user_id": "u-1", "att_status": 3,
             "idfa": "6D92078A-8246-4BA4-AE5B-76104861E7DC", "idfv": "F1A2B3C4-0000-4000-8000-000000000001",
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
        #expect(record.keywordMatchType == "BROAD")
        #expect(record.creativeSetID == nil)
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

    /// The match type in the Apple Ads API's spelling, so one keyword is one line and one
    /// Mixpanel value whether iAd or the API named it; `raw` keeps the dictionary's own.
    @Test(arguments: [("Exact", "EXACT"), ("Broad", "BROAD"), ("search match", "SEARCH_MATCH"), ("EXACT", "EXACT")])
    func theMatchTypeIsStoredInTheAppleAdsAPIsSpelling(sent: String, stored: String) throws {
        let record = try normalize(
            """
            {"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true", "iad-keyword-id": "3",
             "iad-keyword": "calm", "iad-keyword-matchtype": "\(sent)"}}
            """)
        #expect(record.keywordMatchType == stored)
        #expect(record.raw?["Version3.1"]?["iad-keyword-matchtype"] == .string(sent))
    }

    /// The iAd network's dictionaries, as apps logged them before Search Ads: the ad's
    /// creative and its impression, under keys later dictionaries no longer have.
    @Test func theIAdNetworksCreativeAndImpressionFillTheRecordsFields() throws {
        let record = try normalize(
            """
            {"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true", "iad-campaign-id": "15292426",
             "iad-lineitem-id": "15307675", "iad-lineitem-name": "TestCA2_L1", "iad-creative-id": "90841",
             "iad-creative-name": "BoxFlip_iPad", "iad-impression-date": "2015-08-19T17:17:00Z",
             "iad-click-date": "2015-08-19T17:18:00Z", "iad-conversion-date": "2015-08-19T17:18:07Z"}}
            """)
        #expect(record.creativeSetID == 90_841)
        #expect(record.creativeSetName == "BoxFlip_iPad")
        #expect(record.impressionDate == Date(timeIntervalSince1970: 1_440_004_620))
        #expect(record.raw?["Version3.1"]?["iad-creative-name"] == .string("BoxFlip_iPad"))
        // A creative set, where a dictionary names both, is the newer key's.
        let both = try normalize(
            """
            {"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true", "iad-creative-id": "1",
             "iad-creative-name": "Old", "iad-creativeset-id": "2", "iad-creativeset-name": "New"}}
            """)
        #expect(both.creativeSetID == 2 && both.creativeSetName == "New")
    }

    @Test func appleTestPayloadsAreMarked() throws {
        let record = try normalize(
            """
            {"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true",
             "iad-org-id": "1234567890", "iad-campaign-id": "1234567890", "iad-keyword": "Keyword"}}
            """)
        #expect(record.isTest)
    }

    /// An app sends the all-zero IDFV when `identifierForVendor` was nil: it names no
    /// device, and kept, it made one person of every user who sent it.
    @Test func theAllZeroIDFVIsNoDevice() throws {
        let body = { (idfv: String) in
            #"{"app_id": "1", "app_user_id": "u", "idfv": "\#(idfv)", "Version3.1": {"iad-attribution": "false"}}"#
        }
        #expect(try normalize(body("00000000-0000-0000-0000-000000000000")).idfv == nil)
        #expect(
            try normalize(body("6D92078A-8246-4BA4-AE5B-76104861E7DC")).idfv == "6D92078A-8246-4BA4-AE5B-76104861E7DC")
        // An id that is no UUID would join devices in reports; every route refuses it.
        #expect(throws: GatewayError.self) { try normalize(body("zzz")) }
    }

    /// A click in the year 0 is refused, not stored as it came, as /v1/events refuses it.
    @Test func aDateOutsideTheAppStoresYearsIsRefusedNamingItsField() throws {
        let body = { (date: String) in
            #"{"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true", "iad-campaign-id": "1", "iad-click-date": "\#(date)"}}"#
        }
        #expect(try normalize(body("2020-08-04T17:18:07Z")).clickDate != nil)
        for date in ["0000-01-01T00:00:00Z", "2150-01-01T00:00:00Z"] {
            do {
                _ = try normalize(body(date))
                Issue.record("\(date) was taken")
            } catch let error as GatewayError {
                #expect(error.field?.hasSuffix("iad-click-date") == true, "\(error)")
            }
        }
    }

    /// An id sent in lower case is upper-cased: kept so, one device would be two, with two
    /// delivery lanes to a vendor and no order between its events.
    @Test func deviceIDsAreKeptInTheUpperCaseIOSWrites() throws {
        let record = try normalize(
            #"{"app_id": "1", "app_user_id": "u", "att_status": 3, "idfv": "6d92078a-8246-4ba4-ae5b-76104861e7dc", "idfa": "f1a2b3c4-0000-4000-8000-00000000000a", "Version3.1": {"iad-attribution": "false"}}"#
        )
        #expect(record.idfv == "6D92078A-8246-4BA4-AE5B-76104861E7DC")
        #expect(record.idfa == "F1A2B3C4-0000-4000-8000-00000000000A")
        let upper = try normalize(
            #"{"app_id": "1", "app_user_id": "u", "idfv": "6D92078A-8246-4BA4-AE5B-76104861E7DC", "Version3.1": {"iad-attribution": "false"}}"#
        )
        #expect(record.deliveryLane == upper.deliveryLane)
    }

    @Test func theIDFAIsKeptOnlyWithConsent() throws {
        let body = { (status: Int, idfa: String) in
            #"{"app_id": "1", "app_user_id": "u", "att_status": \#(status), "idfa": "\#(idfa)", "Version3.1": {"iad-attribution": "false"}}"#
        }
        #expect(try normalize(body(2, "6D92078A-8246-4BA4-AE5B-76104861E7DC")).idfa == nil)
        #expect(try normalize(body(3, "00000000-0000-0000-0000-000000000000")).idfa == nil)
        #expect(try normalize(body(3, "6D92078A-8246-4BA4-AE5B-76104861E7DC")).idfa != nil)
        // Nor does `raw`, the payload kept for audit, hold an IDFA the record may not.
        #expect(try normalize(body(2, "6D92078A-8246-4BA4-AE5B-76104861E7DC")).raw?["idfa"] == nil)
        #expect(try normalize(body(3, "6D92078A-8246-4BA4-AE5B-76104861E7DC")).raw?["idfa"] != nil)
    }

    @Test(
        arguments: [
            ("", "malformed_json", nil),
            ("{\"app_id\": ", "malformed_json", nil),
            ("[]", "malformed_json", nil),
            (#"{"app_user_id": "u", "Version3.1": {}}"#, "missing_field", "app_id"),
            (#"{"app_id": "1", "Version3.1": {}}"#, "missing_field", "app_user_id"),
            (#"{"app_id": "1", "app_user_id": "u"}"#, "missing_field", "Version3.1"),
            (#"{"app_id": "1", "app_user_id": "u", "Version3.1": {}}"#, "missing_field", "Version3.1.iad-attribution"),
            (
                #"{"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "maybe"}}"#, "invalid_field",
                "Version3.1.iad-attribution"
            ),
            (
                #"{"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true", "iad-campaign-id": "12a"}}"#,
                "invalid_field", "Version3.1.iad-campaign-id"
            ),
            (
                #"{"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true", "iad-click-date": "yesterday"}}"#,
                "invalid_field", "Version3.1.iad-click-date"
            ),
            (#"{"app_id": "1", "app_user_id": ["u"], "Version3.1": {}}"#, "invalid_field", "app_user_id"),
            (#"{"app_id": "1", "app_user_id": "u", "att_status": 7, "Version3.1": {}}"#, "invalid_field", "att_status"),
            ("null", "malformed_json", nil),
            (#""a string""#, "malformed_json", nil),
            (
                #"[{"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true"}}]"#, "malformed_json",
                nil
            ),
            (#"{"app_id": 1.5, "app_user_id": "u", "Version3.1": {}}"#, "invalid_field", "app_id"),
            (#"{"app_id": "1", "app_user_id": "u", "Version3.1": "true"}"#, "invalid_field", "Version3.1"),
            (
                #"{"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true", "iad-campaign-id": 12.5}}"#,
                "invalid_field", "Version3.1.iad-campaign-id"
            ),
            (
                #"{"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true", "iad-org-id": true}}"#,
                "invalid_field", "Version3.1.iad-org-id"
            ),
            (
                #"{"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true", "iad-lineitem-id": "x7"}}"#,
                "invalid_field", "Version3.1.iad-lineitem-id"
            ),
            (
                #"{"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true", "iad-conversion-date": "2024-02-31T00:00:00Z"}}"#,
                "invalid_field", "Version3.1.iad-conversion-date"
            ),
        ] as [(String, String, String?)])
    func unreadablePayloadsNameTheField(body: String, code: String, field: String?) {
        let error = error(body)
        #expect(error?.code.name == code)
        #expect(error?.field == field)
    }

    @Test(arguments: [
        ("newdownload", RecordKind.install, "Download"),
        ("Download", .install, "Download"),
        ("redownload", .reinstall, "Redownload"),
        ("Redownload", .reinstall, "Redownload"),
    ])
    func conversionTypesAreNormalised(sent: String, kind: RecordKind, conversionType: String) throws {
        let record = try normalize(
            """
            {"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true", "iad-campaign-id": "5",
             "iad-conversion-type": "\(sent)"}}
            """)
        #expect(record.kind == kind)
        #expect(record.conversionType == conversionType)
    }

    @Test func withoutAConversionTypeItIsAnInstall() throws {
        let record = try normalize(#"{"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true"}}"#)
        #expect(record.kind == .install)
        #expect(record.conversionType == nil)
    }

    @Test func numbersAndBooleansAsJSONTypes() throws {
        let record = try normalize(
            """
            {"app_id": 987654321, "app_user_id": "u-9", "att_status": 0,
             "Version3.1": {"iad-attribution": true, "iad-org-id": 40669820, "iad-campaign-id": 542370539,
              "iad-adgroup-id": 542317095, "iad-keyword-id": 87675432, "iad-ad-id": 542317136,
              "iad-creativeset-id": 0, "iad-click-date": "2020-08-04T17:18:07Z"}}
            """)
        #expect(record.appID == "987654321")
        #expect(record.dedupeKey == "iad:987654321:u-9")
        #expect(record.attributed)
        #expect(record.attStatus == 0)
        #expect(record.orgID == 40_669_820)
        #expect(record.campaignID == 542_370_539)
        #expect(record.adGroupID == 542_317_095)
        #expect(record.keywordID == 87_675_432)
        #expect(record.adID == 542_317_136)
        #expect(record.creativeSetID == nil)
        #expect(record.clickDate == Date(timeIntervalSince1970: 1_596_561_487))
        #expect(!record.isTest)
        // Ids beyond a double's exact range survive, as numbers and as strings.
        let big = try normalize(
            #"{"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": 1, "iad-campaign-id": 9007199254740993, "iad-org-id": "9007199254740995"}}"#
        )
        #expect(big.attributed)
        #expect(big.campaignID == 9_007_199_254_740_993)
        #expect(big.orgID == 9_007_199_254_740_995)
    }

    @Test func anOrganicAnswerDropsEveryCampaignFieldButKeepsThemInRaw() throws {
        let record = try normalize(
            """
            {"app_id": "1", "app_user_id": "u", "att_status": 3, "idfa": "6D92078A-8246-4BA4-AE5B-76104861E7DC",
             "Version3.1": {"iad-attribution": "false", "iad-org-id": "40669820", "iad-org-name": "Org",
              "iad-campaign-id": "15292426", "iad-campaign-name": "Brand", "iad-adgroup-id": "1", "iad-adgroup-name": "G",
              "iad-lineitem-id": "2", "iad-keyword-id": "3", "iad-keyword": "calm", "iad-keyword-matchtype": "Broad",
              "iad-ad-id": "4", "iad-creativeset-id": "5", "iad-country-or-region": "GB",
              "iad-conversion-type": "newdownload", "iad-click-date": "2020-08-04T17:18:07Z",
              "iad-conversion-date": "2020-08-04T17:19:41Z", "iad-purchase-date": "2020-08-04T17:19:41Z"}}
            """)
        #expect(!record.attributed)
        #expect(record.resolution == .resolved)
        #expect(record.kind == .install)
        #expect(record.orgID == nil && record.orgName == nil)
        #expect(record.campaignID == nil && record.campaignName == nil)
        #expect(record.adGroupID == nil && record.adGroupName == nil)
        #expect(record.keywordID == nil && record.keyword == nil && record.keywordMatchType == nil)
        #expect(record.adID == nil && record.creativeSetID == nil)
        #expect(record.countryOrRegion == nil && record.conversionType == nil)
        #expect(record.clickDate == nil && record.conversionDate == nil && record.purchaseDate == nil)
        #expect(!record.isTest)
        // The device fields are not campaign fields: they stay.
        #expect(record.idfa == "6D92078A-8246-4BA4-AE5B-76104861E7DC")
        #expect(record.raw?["Version3.1"]?["iad-campaign-id"] == .string("15292426"))
    }

    @Test(arguments: ["iad-org-id", "iad-campaign-id", "iad-adgroup-id", "iad-lineitem-id"])
    func anyOfApplesTestIDsMarksTheRecord(key: String) throws {
        let record = try normalize(
            #"{"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true", "\#(key)": "1234567890"}}"#)
        #expect(record.isTest)
    }

    /// No id of Apple's is negative, and a number that is not whole is no status.
    @Test func aNegativeIdOrAFractionalStatusIsRefusedNamingItsField() throws {
        let negative = error(
            #"{"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true", "iad-campaign-id": -5}}"#)
        #expect(negative?.field == "Version3.1.iad-campaign-id", "\(String(describing: negative))")
        let fraction = error(
            #"{"app_id": "1", "app_user_id": "u", "att_status": 3.5, "Version3.1": {"iad-attribution": "false"}}"#)
        #expect(fraction?.field == "att_status" && fraction?.message.contains("integer id") == false)
    }

    @Test func theIDFANeedsAnAuthorisedStatusGivenInAnyForm() throws {
        let idfa = "6D92078A-8246-4BA4-AE5B-76104861E7DC"
        let body = { (status: String) in
            #"{"app_id": "1", "app_user_id": "u", \#(status) "idfa": "\#(idfa)", "Version3.1": {"iad-attribution": "false"}}"#
        }
        #expect(try normalize(body("")).idfa == nil)
        #expect(try normalize(body(#""att_status": null,"#)).idfa == nil)
        #expect(try normalize(body(#""att_status": "3","#)).idfa == idfa)
        #expect(try normalize(body(#""att_status": 3,"#)).attStatus == 3)
        let denied = try normalize(body(#""att_status": 1, "idfv": "F1A2B3C4-0000-4000-8000-000000000001","#))
        #expect(denied.idfa == nil)
        #expect(denied.idfv == "F1A2B3C4-0000-4000-8000-000000000001")
        #expect(denied.attStatus == 1)
    }

    @Test func theDedupeKeyIsTheAppAndTheUser() throws {
        let body = { (app: String, user: String, campaign: String) in
            #"{"app_id": "\#(app)", "app_user_id": "\#(user)", "Version3.1": {"iad-attribution": "true", "iad-campaign-id": "\#(campaign)"}}"#
        }
        let first = try normalize(body("111", "alice", "1"))
        let again = try normalize(body("111", "alice", "2"))
        #expect(first.dedupeKey == "iad:111:alice")
        #expect(again.dedupeKey == first.dedupeKey)
        #expect(again.recordID != first.recordID)
        #expect(try normalize(body("111", "bob", "1")).dedupeKey == "iad:111:bob")
        #expect(try normalize(body("222", "alice", "1")).dedupeKey == "iad:222:alice")
        // A colon inside an id cannot make two different installs collide.
        let split = try normalize(body("1:2", "3", "1")).dedupeKey
        #expect(split != (try normalize(body("1", "2:3", "1")).dedupeKey))
        #expect(split == "iad:1%3A2:3")
    }

    @Test func theRawPayloadIsKeptWhole() throws {
        let json = #"""
            {"app_id": "1", "app_user_id": "u", "extra": {"n": 1.5, "ok": true, "none": null, "list": ["a", 2]},
             "Version3.1": {"iad-attribution": "true", "iad-keyword": "calm"}}
            """#
        let record = try normalize(json)
        #expect(record.raw == (try JSONValue.parse(Data(json.utf8))))
        #expect(record.raw?["extra"]?["n"] == .double(1.5))
        #expect(record.raw?["extra"]?["ok"] == .bool(true))
        #expect(record.raw?["extra"]?["none"] == .null)
        #expect(record.raw?["extra"]?["list"] == .array([.string("a"), .integer(2)]))
        #expect(record.raw?["Version3.1"]?["iad-attribution"] == .string("true"))
    }
}

/// The lenient ISO-8601 reader every provider uses, and the writer of every stored date.
@Suite struct ISO8601Tests {
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

    @Test(arguments: [
        ("2020-08-04T17:18:07Z", 1_596_561_487.0),
        ("2020-08-04T17:18Z", 1_596_561_480.0),
        ("2020-08-04T19:18+02:00", 1_596_561_480.0),
        ("2020-08-04T19:18:07+0200", 1_596_561_487.0),
        ("2020-08-04T12:18:07-05:00", 1_596_561_487.0),
        ("2020-08-04t17:18:07z", 1_596_561_487.0),
        ("2020-08-04 17:18:07Z", 1_596_561_487.0),
        ("2020-08-04T17:18:07.250Z", 1_596_561_487.25),
        ("2020-08-04T17:18:07,25Z", 1_596_561_487.25),
        ("2020-08-04T19:18:07.5+02:00", 1_596_561_487.5),
        ("2020-08-04T17:18:07.123456Z", 1_596_561_487.123456),
        ("1969-12-31T23:59:59Z", -1.0),
        ("2000-02-29T00:00:00Z", 951_782_400.0),
    ])
    func parsesEveryShape(text: String, seconds: Double) throws {
        let date = try #require(ISO8601.parse(text))
        #expect(abs(date.timeIntervalSince1970 - seconds) < 0.000_01)
    }

    @Test(arguments: [
        "", "2020-08-04", "2020-08-04T17:18:07", "2020-08-04T17Z", "2020-8-4T17:18:07Z", "20200804T171807Z",
        "2024-02-31T00:00:00Z", "2023-02-29T00:00:00Z", "2024-04-31T00:00:00Z", "2024-13-01T00:00:00Z",
        "2024-00-10T00:00:00Z", "2024-01-00T00:00:00Z", "2024-01-01T24:00:00Z", "2024-01-01T12:60:00Z",
        "2024-01-01T12:00:61Z", "2024-01-01T12:00:00.Z", "2024-01-01T12:00:00Zjunk", "2024-01-01T12:00:00+2",
        "2024-01-01T12:00:00 Z", "yesterday",
    ])
    func rejectsWhatIsNotADate(text: String) {
        #expect(ISO8601.parse(text) == nil)
    }

    @Test(arguments: [
        "2020-08-04T17:18:07Z", "2020-08-04T17:18:07.001Z", "2020-08-04T17:18:07.999Z", "1970-01-01T00:00:00Z",
        "1969-12-31T23:59:59.500Z", "2024-02-29T23:59:59.120Z", "2100-01-01T00:00:00Z",
    ])
    func formatRoundTripsWhatItWrites(text: String) throws {
        let date = try #require(ISO8601.parse(text))
        #expect(ISO8601.format(date) == text)
        #expect(ISO8601.parse(ISO8601.format(date)) == date)
    }

    @Test func formatWritesUTCAndRoundsToTheMillisecond() throws {
        let offset = try #require(ISO8601.parse("2020-08-04T19:18:07+02:00"))
        #expect(ISO8601.format(offset) == "2020-08-04T17:18:07Z")
        #expect(ISO8601.format(Date(timeIntervalSince1970: 1_596_561_487.0004)) == "2020-08-04T17:18:07Z")
        #expect(ISO8601.format(Date(timeIntervalSince1970: 1_596_561_487.9996)) == "2020-08-04T17:18:08Z")
        #expect(ISO8601.format(Date(timeIntervalSince1970: 1_596_561_487.0126)) == "2020-08-04T17:18:07.013Z")
        #expect(ISO8601.format(Date(timeIntervalSince1970: -0.25)) == "1969-12-31T23:59:59.750Z")
    }
}
