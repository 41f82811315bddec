import Foundation
import GatewayCore
import Testing

@testable import GatewayProviders

/// Apple's AdServices answers, read offline (no network: `normalize` and `accept` are pure).
@Suite struct AdServicesProviderTests {
    let provider = AdServicesProvider(options: .init())

    func normalize(_ answer: String) throws -> AttributionRecord {
        let records = try provider.normalize(
            IngestPayload(body: Data(answer.utf8), receivedAt: Date(timeIntervalSince1970: 0)))
        #expect(records.count == 1)
        return try #require(records.first)
    }

    @Test func anAnswerImportedWithTheAppsFieldsKeepsThemApartWithoutTheTokenOrAnIDFAWithoutConsent() throws {
        let record = try normalize(
            #"{"attribution":true,"campaignId":542370539,"app_id":"1","app_user_id":"u9","idfv":"6D92078A-8246-4BA4-AE5B-76104861E7DD","att_status":2,"idfa":"6D92078A-8246-4BA4-AE5B-76104861E7DC","token":"SECRETTOKENabc"}"#
        )
        #expect(
            record.appID == "1" && record.appUserID == "u9" && record.idfv == "6D92078A-8246-4BA4-AE5B-76104861E7DD")
        #expect(record.idfa == nil && record.attStatus == 2 && record.campaignID == 542_370_539)
        let raw = try #require(record.raw)
        #expect(raw["apple"]?["body"] == .object(["attribution": .bool(true), "campaignId": .integer(542_370_539)]))
        #expect(raw["request"]?["app_user_id"] == .string("u9"))
        #expect(raw["request"]?["token_sha256"] == .string(SHA256Text.hex("SECRETTOKENabc")))
        let text = AttributionRecord.jsonText(.json(raw))
        #expect(!text.contains("SECRETTOKEN") && !text.contains("E7DC"), "\(text)")
        // Keyed by its token, as the live route keys it: the answer to a token resolved live,
        // or imported again in another spelling, is a duplicate.
        #expect(record.dedupeKey == AdServicesProvider.dedupeKey(token: "SECRETTOKENabc"))
        let respelled = try normalize(
            #"{"token":"SECRETTOKENabc", "app_id":"1","app_user_id":"u9","campaignId":542370539,"attribution":true}"#)
        #expect(respelled.dedupeKey == record.dedupeKey)
        // Apple's answer alone, as `normalize` reads it, has no request.
        #expect(try normalize(#"{"attribution":false}"#).raw?["request"] == nil)
        // Apple's organic `{}`, kept with the user it was for: organic, not refused as
        // another source's payload for having none of Apple's fields.
        let organic = try normalize(#"{"app_id":"1","app_user_id":"u3","att_status":3}"#)
        #expect(!organic.attributed && organic.resolution == .resolved && organic.appUserID == "u3")
        #expect(organic.raw?["apple"]?["body"] == .object([:]))
        // A token with the app's fields and nothing of Apple's is the route's request: read
        // as organic, a file of requests stored every user organic, Apple never asked.
        #expect(throws: GatewayError.self) {
            try normalize(#"{"token":"QUJDREVG","app_id":"1","app_user_id":"u3","att_status":3}"#)
        }
        #expect(throws: GatewayError.self) {
            try normalize(#"{"token":"QUJDREVG","attribution":null,"app_id":"1","app_user_id":"u3"}"#)
        }
        #expect(try !normalize(#"{"attribution":false,"token":"QUJDREVG","app_id":"1","app_user_id":"u3"}"#).attributed)
        // The app's fields alone do not make an iAd payload an answer.
        #expect(throws: GatewayError.self) { try normalize(#"{"app_id":"1","app_user_id":"u3","Version3.1":{}}"#) }
    }

    @Test func everyFieldOfAnAttributedAnswer() throws {
        let record = try normalize(
            """
            {"attribution":true,"orgId":40669820,"campaignId":542370539,"conversionType":"Download","claimType":"Click",
             "adGroupId":542317095,"countryOrRegion":"US","keywordId":87675432,"adId":542317136,"creativeSetId":0,
             "clickDate":"2024-10-08T17:17Z","impressionDate":"2024-10-08T17:15Z","supplyPlacement":"APPSTORE_SEARCH_TAB"}
            """)
        #expect(record.attributed && record.resolution == .resolved && record.kind == .install)
        #expect(record.orgID == 40_669_820)
        #expect(record.campaignID == 542_370_539)
        #expect(record.adGroupID == 542_317_095)
        #expect(record.keywordID == 87_675_432)
        #expect(record.adID == 542_317_136)
        // Apple's `0` for a retired creative set is no id: absent, as DESIGN asks.
        #expect(record.creativeSetID == nil)
        #expect(record.countryOrRegion == "US")
        #expect(record.claimType == "Click")
        #expect(record.supplyPlacement == "APPSTORE_SEARCH_TAB")
        // Apple's dates stop at the minute.
        #expect(record.clickDate == Date(timeIntervalSince1970: 1_728_407_820))
        #expect(record.impressionDate == Date(timeIntervalSince1970: 1_728_407_700))
        #expect(!record.isTest)
    }

    @Test(arguments: [
        ("Download", "Download", RecordKind.install), ("Redownload", "Redownload", .reinstall),
        ("PreOrder", "PreOrder", .install), ("preorder", "PreOrder", .install),
        ("REDOWNLOAD", "Redownload", .reinstall),
    ])
    func conversionTypesInAnyCase(sent: String, expected: String, kind: RecordKind) throws {
        let record = try normalize(#"{"attribution":true,"campaignId":1,"conversionType":"\#(sent)"}"#)
        #expect(record.conversionType == expected)
        #expect(record.kind == kind)
    }

    @Test func aViewThroughHasNoClickDate() throws {
        let record = try normalize(
            #"{"attribution":true,"campaignId":1,"claimType":"Impression","impressionDate":"2025-03-01T09:30Z"}"#)
        #expect(record.claimType == "Impression")
        #expect(record.clickDate == nil && record.impressionDate != nil)
    }

    @Test(arguments: [#"{"attribution":false}"#, "{}", #"{"error" : "1"}"#, #"{"attribution":false,"campaignId":5}"#])
    func organicAnswersCarryNoCampaign(answer: String) throws {
        let record = try normalize(answer)
        #expect(!record.attributed && record.resolution == .resolved)
        #expect(record.campaignID == nil)
    }

    @Test func idsRelayedAsStringsAreRead() throws {
        let record = try normalize(#"{"attribution":"true","campaignId":"542370539","keywordId":"12"}"#)
        #expect(record.campaignID == 542_370_539 && record.keywordID == 12)
    }

    @Test func applesDeveloperModeAnswerIsTestData() throws {
        let record = try normalize(
            """
            {"attribution":true,"orgId":1234567890,"campaignId":1234567890,"conversionType":"Download",
             "clickDate":"2020-04-08T17:17Z","adGroupId":1234567890,"countryOrRegion":"US","keywordId":12323222,
             "adId":1234567890}
            """)
        #expect(record.isTest)
    }

    @Test(arguments: [
        (#"{"attribution":true,"campaignId":"abc"}"#, "campaignId"),
        (#"{"attribution":true,"clickDate":"yesterday"}"#, "clickDate"),
        // Another source's payload (an iAd dictionary), not Apple's answer read as organic.
        (#"{"app_id":"1","Version3.1":{"iad-attribution":"true"}}"#, "attribution"),
        // A proxy's own error, not Apple's organic {"error":"1"}.
        (#"{"error":"Bad Gateway"}"#, "attribution"),
    ])
    func anUnreadableFieldIsAnErrorNamingIt(answer: String, field: String) {
        #expect { try normalize(answer) } throws: { ($0 as? GatewayError)?.field == field }
    }

    // MARK: accepting tokens

    func accept(_ body: String) throws -> PendingWork {
        try provider.accept(IngestPayload(body: Data(body.utf8), receivedAt: Date(timeIntervalSince1970: 0)))
    }

    @Test func aTokenIsItsOwnDedupeKeyWhoeverSendsIt() throws {
        let first = try accept(#"{"token":"QUJD\n","app_id":"1","app_user_id":"a"}"#)
        let again = try accept(#"{"token":"QUJD","app_id":"1","app_user_id":"b"}"#)
        let other = try accept(#"{"token":"REVG","app_id":"1","app_user_id":"a"}"#)
        #expect(first.dedupeKey == again.dedupeKey)
        #expect(first.dedupeKey != other.dedupeKey)
        #expect(first.recordID != again.recordID)
        // The key is a hash: the token itself is not written into logs or sinks.
        #expect(!first.dedupeKey.contains("QUJD"))
    }

    @Test func theIDFAIsKeptOnlyWithConsent() throws {
        let idfa = "6D92078A-8246-4BA4-AE5B-76104861E7DC"
        let denied = try accept(#"{"token":"QUJD","app_id":"1","app_user_id":"a","att_status":2,"idfa":"\#(idfa)"}"#)
        #expect(!String(decoding: denied.state, as: UTF8.self).contains(idfa))
        let allowed = try accept(#"{"token":"QUJD","app_id":"1","app_user_id":"a","att_status":3,"idfa":"\#(idfa)"}"#)
        #expect(String(decoding: allowed.state, as: UTF8.self).contains(idfa))
    }

    @Test func oversizedTokensAreRefused() {
        let long = String(repeating: "A", count: AdServicesProvider.maxTokenLength + 1)
        #expect { try accept(#"{"token":"\#(long)","app_id":"1","app_user_id":"a"}"#) } throws: {
            ($0 as? GatewayError)?.field == "token"
        }
    }

    @Test func errorBackoffDoublesIsCappedAndHonoursRetryAfter() {
        var options = AdServicesProvider.Options()
        options.errorBackoffInitial = .seconds(1)
        options.errorBackoffMax = .seconds(8)
        let top = AdServicesProvider(options: options, random: { 1 })
        #expect(top.backoff(1, floor: nil) == .seconds(1))
        #expect(top.backoff(3, floor: nil) == .seconds(4))
        #expect(top.backoff(10, floor: nil) == .seconds(8))
        let bottom = AdServicesProvider(options: options, random: { 0 })
        #expect(bottom.backoff(3, floor: nil) == .seconds(2))
        #expect(bottom.backoff(1, floor: .seconds(30)) == .seconds(30))
    }
}
