import Foundation
import GatewayCore
import Testing

@testable import GatewayProviders

/// Real Apple-signed postbacks (production postbacks of ad networks and Apple's own
/// examples, with tampered copies), from `../shared/testdata/skan/public_vectors.json`.
@Suite struct PostbackVectorTests {
    struct Vector: Sendable, CustomTestStringConvertible {
        let id: String
        let postback: [String: JSONValue]
        let expectedValid: Bool
        var testDescription: String { id }
    }

    static let vectors: [Vector] = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/skan_public_vectors.json")
        guard let data = try? Data(contentsOf: url), case .array(let items)? = try? JSONValue.parse(data) else {
            return []
        }
        return items.compactMap { item in
            guard case .string(let id)? = item["id"], case .object(let postback)? = item["postback"],
                case .bool(let valid)? = item["expected_valid"]
            else { return nil }
            return Vector(id: id, postback: postback, expectedValid: valid)
        }
    }()

    @Test func theFileHoldsEveryVector() {
        #expect(Self.vectors.count == 36)
    }

    @Test(arguments: vectors)
    func eachPostbackGetsItsExpectedVerdict(vector: Vector) {
        let verdict = SKANSignature.verify(vector.postback, keys: .apple)
        #expect(verdict.outcome == (vector.expectedValid ? .verified : .invalid), "\(verdict.line)")
    }

    func vector(_ id: String) throws -> [String: JSONValue] {
        try #require(Self.vectors.first { $0.id == id }).postback
    }

    func record(_ postback: [String: JSONValue]) throws -> AttributionRecord {
        let body = try JSONEncoder().encode(JSONValue.object(postback))
        return try #require(
            try SKAdNetworkProvider(options: .init()).normalize(
                IngestPayload(body: body, receivedAt: Date(), path: "/.well-known/skadnetwork/report-attribution")
            ).first)
    }

    /// In 2.2 `did-win` is not signed, so whether `source-app-id` is depends on no signed
    /// field: a relay adding or changing `did-win` must not make Apple's postback invalid.
    /// Only the layout that verified says whether the source app is Apple's.
    @Test(arguments: [
        ("skan22-apple-doc", JSONValue.bool(false), true), ("skan22-apple-doc", .bool(true), true),
        ("skan22-unity-nonwinning-test", nil, false), ("skan22-unity-nonwinning-test", .bool(true), false),
    ])
    func a22PostbackVerifiesWhateverItsUnsignedDidWinSays(id: String, didWin: JSONValue?, sourceAppSigned: Bool)
        throws
    {
        var postback = try vector(id)
        postback["did-win"] = didWin
        let verdict = SKANSignature.verify(postback, keys: .apple)
        #expect(verdict.outcome == .verified, "\(verdict.line)")
        #expect(verdict.signedFields.contains("source-app-id") == sourceAppSigned)
    }

    /// The first copy of a postback keeps its key, and Apple's open route takes anyone's:
    /// a relay's copy with unsigned fields added or changed must make the record Apple's
    /// own would, or it takes the install's place (a test, a loss, another campaign).
    @Test(arguments: [
        (
            "skan10-ironsource-real",
            ["source-app-id": JSONValue.integer(0), "conversion-value": .integer(0), "redownload": .bool(true)]
        ),
        ("skan21-tiktok-real", ["did-win": .bool(false), "fidelity-type": .integer(0)]),
        ("skan30-apple-doc-win", ["source-identifier": .string("9999"), "postback-sequence-index": .integer(2)]),
    ])
    func unsignedFieldsChangeNothingInAVerifiedRecord(id: String, changes: [String: JSONValue]) throws {
        let genuine = try record(try vector(id))
        var altered = try vector(id)
        altered.merge(changes) { $1 }
        let copy = try record(altered)
        #expect(genuine.signature == "verified" && copy.signature == "verified")
        #expect(copy.dedupeKey == genuine.dedupeKey)
        #expect(copy.attributed == genuine.attributed && copy.attributed)
        #expect(copy.didWin == genuine.didWin && copy.isTest == genuine.isTest && !copy.isTest)
        #expect(copy.sourceIdentifier == genuine.sourceIdentifier && copy.sourceAppID == genuine.sourceAppID)
        #expect(copy.postbackSequenceIndex == genuine.postbackSequenceIndex)
        #expect(copy.fidelityType == genuine.fidelityType && copy.redownload == genuine.redownload)
        // Kept for the record's readers, marked as what Apple did not sign.
        for key in changes.keys where key != "conversion-value" {
            #expect(copy.raw?["postback"]?[key] == changes[key])
        }
    }

    @Test func whatEachVersionSignsIsTheRecordsOwn() throws {
        // 3.0 signs its 2-digit campaign id; a source identifier is SKAN 4's.
        #expect(try record(try vector("skan30-apple-doc-win")).sourceIdentifier == "42")
        #expect(try record(try vector("skan40-apple-doc-fine")).sourceIdentifier == "5239")
        // 1.0 signs no redownload, 2.0 does.
        #expect(try record(try vector("skan10-ironsource-real")).redownload == nil)
        #expect(try record(try vector("skan20-facebook-real")).redownload != nil)
        // 2.2 signs no `did-win`: a copy of a postback without a source app, given
        // `did-win: false` and a source app of 0 on the way, verifies as well (the flag
        // takes the source app out of the signed message). It must not become a loss or a
        // test. Apple's own 2.2 test postback is such a postback: what it says unsigned
        // cannot be told from a relay's words.
        var plain = try vector("skan22-unity-nonwinning-test")
        plain["did-win"] = nil
        plain["source-app-id"] = nil
        let genuine = try record(plain)
        for copy in [try vector("skan22-unity-nonwinning-test"), plain.merging(["did-win": .bool(false)]) { $1 }] {
            let altered = try record(copy)
            #expect(genuine.signature == "verified" && altered.signature == "verified")
            #expect(altered.attributed == genuine.attributed && altered.attributed)
            #expect(altered.isTest == genuine.isTest && !altered.isTest)
            #expect(altered.dedupeKey == genuine.dedupeKey)
        }
        // Said, though, so that a sink can set Apple's 2.2 test postbacks apart.
        let mark = { (record: AttributionRecord) in record.raw?["verification"]?["unsigned_test_mark"] }
        #expect(mark(try record(try vector("skan22-unity-nonwinning-test"))) == .bool(true))
        #expect(mark(genuine) == nil)
        // A 3.0 nonwinning postback signs no source app: one added is no test mark.
        var nonwinning = try vector("skan30-apple-doc-nonwinning")
        nonwinning["source-app-id"] = .integer(0)
        nonwinning["conversion-value"] = .integer(0)
        let lost = try record(nonwinning)
        #expect(lost.signature == "verified" && !lost.attributed && !lost.isTest)
    }

    /// The signed message joins values with U+2063: a value holding one moves a field
    /// boundary without changing a byte, so that Apple's genuine signature would vouch
    /// for values it never signed. Each forgery here is built from a real postback.
    @Test func aValueHoldingTheSeparatorCannotMoveAFieldBoundary() throws {
        let separator = "\u{2063}"
        // A 4.0 postback with its redownload folded into the transaction id and its
        // source domain moved into redownload: the same message, another postback.
        var folded = try vector("skan40-apple-doc-fine")
        folded["transaction-id"] = .string("6aafb7a5-0170-41b5-bbe4-fe71dedf1e30" + separator + "false")
        folded["redownload"] = .string("example.com")
        folded["source-domain"] = nil
        // A 2.0 postback read as 1.0 (no version), the version and the rest folded into
        // the four fields 1.0 signs.
        var older = try vector("skan20-apple-doc")
        older["version"] = nil
        older["ad-network-id"] = .string("2.0" + separator + "com.example")
        older["transaction-id"] = .string(
            "6aafb7a5-0170-41b5-bbe4-fe71dedf1e28" + separator + "true" + separator + "1234567891")
        for forgery in [folded, older] {
            let verdict = SKANSignature.verify(forgery, keys: .apple)
            #expect(verdict.outcome == .invalid, "\(verdict.line)")
            #expect(verdict.reason?.contains("U+2063") == true, "\(verdict.line)")
        }
        // The genuine ones still verify.
        #expect(SKANSignature.verify(try vector("skan40-apple-doc-fine"), keys: .apple).outcome == .verified)
        #expect(SKANSignature.verify(try vector("skan20-apple-doc"), keys: .apple).outcome == .verified)
    }

    /// Apple's example in "Identifying the parameters in a postback" (AdAttributionKit).
    static let appleAAKExample: [String: JSONValue] = [
        "jws-string": .string(
            "eyJraWQiOiJhcHBsZS1kZXZlbG9wbWVudC1pZGVudGlmaWVyXC8xIiwiYWxnIjoiRVMyNTYifQ.eyJwb3N0YmFjay1pZGVudGlmaWVyIjoiODU1NDZFQjctRkQzOS00NEJDLTg5OTAtQzk4QTRBQzM2QTQ5IiwicHVibGlzaGVyLWl0ZW0taWRlbnRpZmllciI6MCwibWFya2V0cGxhY2UtaWRlbnRpZmllciI6ImNvbS5hcHBsZS5BcHBTdG9yZSIsImltcHJlc3Npb24tdHlwZSI6ImFwcC1pbXByZXNzaW9uIiwiYWQtbmV0d29yay1pZGVudGlmaWVyIjoiZGV2ZWxvcG1lbnQuYWRhdHRyaWJ1dGlvbmtpdCIsImRpZC13aW4iOnRydWUsInBvc3RiYWNrLXNlcXVlbmNlLWluZGV4IjowLCJjb252ZXJzaW9uLXR5cGUiOiJyZS1lbmdhZ2VtZW50Iiwic291cmNlLWlkZW50aWZpZXIiOiIxMjM0IiwiYWR2ZXJ0aXNlZC1pdGVtLWlkZW50aWZpZXIiOjEwNzM4MDI3NzU2fQ.bAdNwKd6OfHK9tofvjjua4X_JPcFTxXPQSspD9gZkinw97pY7R1aI-LSjl-oxZZF3_K2H5JK5TSEBee4_1U4oQ"
        ),
        "conversion-value": .integer(24), "ad-interaction-type": .string("click"), "country-code": .string("US"),
    ]

    @Test func applesAdAttributionKitExampleVerifiesWithTheDevelopmentKeyOnlyWhenAllowed() throws {
        var keys = PostbackKeys.apple
        #expect(AAKSignature.verify(Self.appleAAKExample, keys: keys).verdict.outcome == .unverifiable)
        keys.allowDevelopmentKeys = true
        let decoded = AAKSignature.verify(Self.appleAAKExample, keys: keys)
        #expect(decoded.verdict.outcome == .verified)
        #expect(decoded.claims["postback-identifier"] == .string("85546EB7-FD39-44BC-8990-C98A4AC36A49"))

        let provider = SKAdNetworkProvider(
            options: {
                var o = SKAdNetworkProvider.Options(); o.keys = keys; return o
            }())
        let body = try JSONEncoder().encode(JSONValue.object(Self.appleAAKExample))
        let record = try #require(
            try provider.normalize(
                IngestPayload(body: body, receivedAt: Date(), path: "/.well-known/appattribution/report-attribution/")
            ).first)
        #expect(record.signature == "verified" && record.skanVersion == "aak")
        #expect(record.transactionID == "85546EB7-FD39-44BC-8990-C98A4AC36A49")
        #expect(record.dedupeKey == "aak:85546EB7-FD39-44BC-8990-C98A4AC36A49")
        #expect(record.appID == "10738027756" && record.sourceIdentifier == "1234")
        // Outside the JWS: kept, but never counted as signed.
        #expect(record.fineValue == 24 && record.countryOrRegion == "US")
        #expect(record.isTest)
    }
}
