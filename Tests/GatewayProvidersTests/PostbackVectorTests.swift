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
        guard let data = try? Data(contentsOf: url), case .array(let items)? = try? JSONValue.parse(data) else { return [] }
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

        let provider = SKAdNetworkProvider(options: { var o = SKAdNetworkProvider.Options(); o.keys = keys; return o }())
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
