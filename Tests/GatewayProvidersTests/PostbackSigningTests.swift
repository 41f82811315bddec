import Crypto
import Foundation
import GatewayCore
import Testing

@testable import GatewayProviders

/// Postbacks signed here with test keys (injected as config would), for every P-256
/// version and optional-field combination, and the ways a signature can be wrong.
@Suite struct PostbackSigningTests {
    let key = P256.Signing.PrivateKey()
    let otherKey = P256.Signing.PrivateKey()

    var keys: PostbackKeys {
        var keys = PostbackKeys.apple
        keys.skanP256 = key.publicKey
        keys.aakProduction = ["test-network/0": key.publicKey]
        return keys
    }

    /// A postback with `fields` signed in `order`, as Apple builds the message.
    func signed(_ fields: [String: JSONValue], order: [String], with signer: P256.Signing.PrivateKey? = nil) throws
        -> [String: JSONValue]
    {
        let message = order.map { SKANSignature.text(fields[$0])! }.joined(separator: "\u{2063}")
        let signature = try (signer ?? key).signature(for: Data(message.utf8))
        var postback = fields
        postback["attribution-signature"] = .string(signature.derRepresentation.base64EncodedString())
        return postback
    }

    func verdict(_ postback: [String: JSONValue]) -> PostbackVerdict {
        SKANSignature.verify(postback, keys: keys)
    }

    static let base: [String: JSONValue] = [
        "ad-network-id": .string("example123.skadnetwork"), "campaign-id": .integer(42),
        "app-id": .integer(525_463_029),
        "transaction-id": .string("6aafb7a5-0170-41b5-bbe4-fe71dedf1e28"), "redownload": .bool(false),
    ]

    static let v3Order = ["version", "ad-network-id", "campaign-id", "app-id", "transaction-id", "redownload"]

    @Test(arguments: [
        ("2.1", true, nil as Bool?), ("2.1", false, nil), ("2.2", true, nil), ("2.2", false, nil),
        ("3.0", true, true), ("3.0", false, true), ("3.0", false, false),
    ])
    func versionsBeforeFourWithAndWithoutTheSourceApp(version: String, sourceApp: Bool, didWin: Bool?) throws {
        var fields = Self.base
        fields["version"] = .string(version)
        if sourceApp { fields["source-app-id"] = .integer(1_234_567_891) }
        var order = Self.v3Order + (sourceApp ? ["source-app-id"] : [])
        if version != "2.1" {
            fields["fidelity-type"] = .integer(1)
            order.append("fidelity-type")
        }
        if let didWin {
            fields["did-win"] = .bool(didWin)
            order.append("did-win")
        }
        // Nonwinning postbacks do not sign a source app.
        if didWin == false { order.removeAll { $0 == "source-app-id" } }
        fields["conversion-value"] = .integer(20)
        #expect(verdict(try signed(fields, order: order)).outcome == .verified)
    }

    @Test(arguments: ["source-app-id", "source-domain", nil] as [String?])
    func versionFourWithEachSource(source: String?) throws {
        var fields: [String: JSONValue] = [
            "version": .string("4.0"), "ad-network-id": .string("KBD757YWX3.skadnetwork"),
            "source-identifier": .string("5239"), "app-id": .integer(525_463_029),
            "transaction-id": .string("6aafb7a5-0170-41b5-bbe4-fe71dedf1e28"), "redownload": .bool(false),
            "fidelity-type": .integer(1), "did-win": .bool(true), "postback-sequence-index": .integer(0),
            "coarse-conversion-value": .string("high"),
        ]
        var order = ["version", "ad-network-id", "source-identifier", "app-id", "transaction-id", "redownload"]
        if let source {
            fields[source] = source == "source-domain" ? .string("example.com") : .integer(1_234_567_891)
            order.append(source)
        }
        order += ["fidelity-type", "did-win", "postback-sequence-index"]
        let postback = try signed(fields, order: order)
        let result = verdict(postback)
        #expect(result.outcome == .verified)
        #expect(!result.signedFields.contains("coarse-conversion-value"))
    }

    /// A SKAN 4 postback's fields without a source app or a value, and the order Apple signs them in.
    static func v4(transaction: String, didWin: Bool, index: Int) -> (
        fields: [String: JSONValue], order: [String]
    ) {
        let fields: [String: JSONValue] = [
            "version": .string("4.0"), "ad-network-id": .string("KBD757YWX3.skadnetwork"),
            "source-identifier": .string("52"), "app-id": .integer(525_463_029),
            "transaction-id": .string(transaction), "redownload": .bool(false),
            "fidelity-type": .integer(1), "did-win": .bool(didWin), "postback-sequence-index": .integer(Int64(index)),
        ]
        let order = [
            "version", "ad-network-id", "source-identifier", "app-id", "transaction-id", "redownload",
            "fidelity-type", "did-win", "postback-sequence-index",
        ]
        return (fields, order)
    }

    @Test func aSourceDomainARelayAddsToANonwinningPostbackIsNotSigned() throws {
        let (fields, order) = Self.v4(transaction: "6aafb7a5-0170-41b5-bbe4-fe71dedf1e40", didWin: false, index: 0)
        var relayed = try signed(fields, order: order)
        relayed["source-domain"] = .string("relay.example")
        let result = verdict(relayed)
        #expect(result.outcome == .verified, "\(result.line)")
        #expect(!result.signedFields.contains("source-domain"))
    }

    func v3() throws -> [String: JSONValue] {
        var fields = Self.base
        fields["version"] = .string("3.0")
        fields["fidelity-type"] = .integer(1)
        fields["did-win"] = .bool(true)
        return try signed(fields, order: Self.v3Order + ["fidelity-type", "did-win"])
    }

    @Test(arguments: [("1.0", false), ("2.0", true), ("2.0", false)])
    func theP192VersionsWithTheirOwnFieldLists(version: String, sourceApp: Bool) throws {
        let signer = try #require(P192TestSigner())
        var keys = self.keys
        keys.skanP192 = try PostbackKeys.p192Key(signer.publicKeyBase64)
        var postback = Self.base
        // Real 1.0 postbacks carry a version and redownload that 1.0 does not sign.
        postback["version"] = .string(version)
        if sourceApp { postback["source-app-id"] = .integer(1_234_567_891) }
        let order =
            version == "1.0"
            ? ["ad-network-id", "campaign-id", "app-id", "transaction-id"]
            : Self.v3Order + (sourceApp ? ["source-app-id"] : [])
        let message = order.map { SKANSignature.text(postback[$0])! }.joined(separator: "\u{2063}")
        postback["attribution-signature"] = .string(try #require(signer.sign(message)).base64EncodedString())
        postback["conversion-value"] = .integer(7)
        #expect(SKANSignature.verify(postback, keys: keys).outcome == .verified)

        var tampered = postback
        tampered["campaign-id"] = .integer(43)
        #expect(SKANSignature.verify(tampered, keys: keys).outcome == .invalid)
        // Apple's P-192 key does not verify what the test key signed.
        #expect(SKANSignature.verify(postback, keys: .apple).outcome == .invalid)
    }

    @Test func numbersSentAsStringsAndExtraUnsignedKeysStillVerify() throws {
        var postback = try v3()
        postback["campaign-id"] = .string("42")
        postback["app-id"] = .string("525463029")
        postback["timestamp"] = .string("1700000000")
        postback["adjust-campaign"] = .string("spring")
        postback["conversion-value"] = .integer(63)
        #expect(verdict(postback).outcome == .verified)
    }

    @Test func aChangedSignedFieldOrAnotherKeyIsInvalid() throws {
        var changed = try v3()
        changed["transaction-id"] = .string("another-transaction")
        #expect(
            verdict(changed)
                == PostbackVerdict(
                    .invalid, version: "3.0", reason: "bad signature",
                    signedFields: Self.v3Order + ["fidelity-type", "did-win"]))

        var fields = Self.base
        fields["version"] = .string("3.0")
        fields["fidelity-type"] = .integer(1)
        fields["did-win"] = .bool(true)
        let foreign = try signed(fields, order: Self.v3Order + ["fidelity-type", "did-win"], with: otherKey)
        #expect(verdict(foreign).outcome == .invalid)
    }

    @Test func malformedSignaturesAreInvalidNotACrash() throws {
        let good = try v3()
        guard case .string(let encoded)? = good["attribution-signature"], let der = Data(base64Encoded: encoded) else {
            Issue.record("no signature")
            return
        }
        let raw = try P256.Signing.ECDSASignature(derRepresentation: der).rawRepresentation
        let cases: [(String, String)] = [
            (der.prefix(der.count - 5).base64EncodedString(), "signature is not DER ECDSA"),
            (raw.base64EncodedString(), "signature is not DER ECDSA"),
            ("not base64 at all!", "signature is not base64"),
            ("", "signature is not DER ECDSA"),
        ]
        for (signature, reason) in cases {
            var postback = good
            postback["attribution-signature"] = .string(signature)
            let result = verdict(postback)
            #expect(result.outcome == .invalid && result.reason == reason, "\(signature)")
        }
        var missing = good
        missing["transaction-id"] = nil
        #expect(verdict(missing).reason == "missing field transaction-id")
    }

    @Test func anUnknownVersionIsUnverifiable() throws {
        var postback = try v3()
        postback["version"] = .string("5.0")
        #expect(verdict(postback).outcome == .unverifiable)
        #expect(verdict(postback).line == "unverifiable 5.0 unknown version")
    }

    // MARK: AdAttributionKit

    func jws(kid: String, claims: String, signer: P256.Signing.PrivateKey? = nil, raw: Bool = true) throws -> String {
        func encode(_ data: Data) -> String {
            data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let header = encode(Data(#"{"kid":"\#(kid.replacingOccurrences(of: "/", with: "\\/"))","alg":"ES256"}"#.utf8))
        let payload = encode(Data(claims.utf8))
        let signature = try (signer ?? key).signature(for: Data("\(header).\(payload)".utf8))
        return "\(header).\(payload).\(encode(raw ? signature.rawRepresentation : signature.derRepresentation))"
    }

    static let claims =
        #"{"postback-identifier":"P-1","ad-network-identifier":"example.adattributionkit","did-win":true,"postback-sequence-index":1,"source-identifier":"12","advertised-item-identifier":525463029,"conversion-type":"download"}"#

    @Test func adAttributionKitByKidWithRawSignaturesOnly() throws {
        let good: [String: JSONValue] = ["jws-string": .string(try jws(kid: "test-network/0", claims: Self.claims))]
        #expect(AAKSignature.verify(good, keys: keys).verdict.outcome == .verified)
        let der: [String: JSONValue] = [
            "jws-string": .string(try jws(kid: "test-network/0", claims: Self.claims, raw: false))
        ]
        #expect(AAKSignature.verify(der, keys: keys).verdict.reason == "signature is not a 64-byte R‖S")
        let foreign: [String: JSONValue] = [
            "jws-string": .string(try jws(kid: "test-network/0", claims: Self.claims, signer: otherKey))
        ]
        #expect(AAKSignature.verify(foreign, keys: keys).verdict.outcome == .invalid)
        let unknown: [String: JSONValue] = ["jws-string": .string(try jws(kid: "someone/9", claims: Self.claims))]
        #expect(AAKSignature.verify(unknown, keys: keys).verdict.outcome == .unverifiable)
        #expect(AAKSignature.verify(["jws-string": .string("a.b")], keys: keys).verdict.outcome == .invalid)
    }

    @Test func aSourceAppTheSignatureDoesNotCoverIsKeptInRawOnly() throws {
        var fields = Self.base
        fields["version"] = .string("3.0")
        fields["fidelity-type"] = .integer(1)
        fields["did-win"] = .bool(false)
        var postback = try signed(fields, order: Self.v3Order + ["fidelity-type", "did-win"])
        // Added on the way: a nonwinning postback's signature leaves the source app out.
        postback["source-app-id"] = .integer(1_234_567_891)
        #expect(verdict(postback).outcome == .verified)
        let body = try JSONEncoder().encode(JSONValue.object(postback))
        var options = SKAdNetworkProvider.Options()
        options.keys = keys
        let record = try #require(
            try SKAdNetworkProvider(options: options)
                .normalize(IngestPayload(body: body, receivedAt: Date(), path: "/v1/skadnetwork/postbacks")).first)
        #expect(record.signature == "verified")
        #expect(record.sourceAppID == nil)
        #expect(record.raw?["postback"]?["source-app-id"] == .integer(1_234_567_891))
        #expect(record.raw?["verification"]?["unsigned_fields"] == .array([.string("source-app-id")]))

        // Signed, it is the record's.
        var winning = fields
        winning["did-win"] = .bool(true)
        winning["source-app-id"] = .integer(1_234_567_891)
        let signedWin = try signed(winning, order: Self.v3Order + ["source-app-id", "fidelity-type", "did-win"])
        let won = try SKAdNetworkProvider(options: options).normalize(
            IngestPayload(
                body: try JSONEncoder().encode(JSONValue.object(signedWin)), receivedAt: Date(),
                path: "/v1/skadnetwork/postbacks"))
        #expect(won.first?.sourceAppID == "1234567891")
    }

    /// A fine value in a later window's postback, or a coarse value before SKAN 4, is not one
    /// Apple sends: left out (so the model reads no conversion from it) and named.
    @Test func conversionValuesAppleCannotSendAreLeftOut() throws {
        var options = SKAdNetworkProvider.Options()
        options.keys = keys
        options.conversionModel = ConversionModel(windows: [
            0: .init(
                fine: [.init(values: 20...20, outcome: .init(events: ["purchase"]))],
                coarse: ["high": .init(events: ["purchase"])]),
            1: .init(
                fine: [.init(values: 20...20, outcome: .init(events: ["purchase"]))],
                coarse: ["high": .init(events: ["purchase"])]),
        ])
        let provider = SKAdNetworkProvider(options: options)
        func normalize(_ postback: [String: JSONValue]) throws -> AttributionRecord {
            try #require(
                try provider.normalize(
                    IngestPayload(
                        body: try JSONEncoder().encode(JSONValue.object(postback)), receivedAt: Date(),
                        path: "/.well-known/skadnetwork/report-attribution")
                ).first)
        }
        func unrecognized(_ record: AttributionRecord) -> JSONValue? {
            record.raw?["verification"]?["unrecognized_fields"]
        }
        var (fields, order) = Self.v4(transaction: "6aafb7a5-0170-41b5-bbe4-fe71dedf1e41", didWin: true, index: 1)
        fields["conversion-value"] = .integer(20)
        let later = try normalize(try signed(fields, order: order))
        #expect(later.signature == "verified" && later.postbackSequenceIndex == 1)
        #expect(later.fineValue == nil && later.events == nil)
        #expect(unrecognized(later) == .array([.string("conversion-value")]))

        fields["conversion-value"] = nil
        fields["coarse-conversion-value"] = .string("high")
        let coarse = try normalize(try signed(fields, order: order))
        #expect(coarse.coarseValue == "high" && coarse.events == ["purchase"] && unrecognized(coarse) == nil)

        var old = try v3()
        old["coarse-conversion-value"] = .string("high")
        let three = try normalize(old)
        #expect(three.signature == "verified" && three.coarseValue == nil && three.events == nil)
        #expect(unrecognized(three) == .array([.string("coarse-conversion-value")]))
        old["coarse-conversion-value"] = nil
        old["conversion-value"] = .integer(20)
        #expect(try normalize(old).fineValue == 20)
    }

    /// Apple's device retries a refused postback nine times, then drops it: values the
    /// gateway does not know yet must not refuse a postback, whatever its verdict. Those
    /// it cannot verify (a new version, a rotated key) are the likeliest to carry them.
    @Test func postbacksWithValuesNotKnownHereAreKeptWhateverTheirVerdict() throws {
        let fields: [String: JSONValue] = [
            "version": .string("4.0"), "ad-network-id": .string("KBD757YWX3.skadnetwork"),
            "source-identifier": .string("5239"), "app-id": .integer(525_463_029),
            "transaction-id": .string("6aafb7a5-0170-41b5-bbe4-fe71dedf1e28"), "redownload": .bool(false),
            "fidelity-type": .integer(2), "did-win": .bool(true), "postback-sequence-index": .integer(3),
            "coarse-conversion-value": .string("very-high"),
        ]
        let order = [
            "version", "ad-network-id", "source-identifier", "app-id", "transaction-id", "redownload", "fidelity-type",
            "did-win", "postback-sequence-index",
        ]
        var options = SKAdNetworkProvider.Options()
        options.keys = keys
        let provider = SKAdNetworkProvider(options: options)
        func normalize(_ postback: [String: JSONValue]) throws -> AttributionRecord? {
            try provider.normalize(
                IngestPayload(
                    body: try JSONEncoder().encode(JSONValue.object(postback)), receivedAt: Date(),
                    path: "/.well-known/skadnetwork/report-attribution")
            ).first
        }
        let record = try #require(try normalize(try signed(fields, order: order)))
        #expect(record.signature == "verified")
        #expect(record.fidelityType == nil && record.coarseValue == nil && record.postbackSequenceIndex == nil)
        #expect(
            record.raw?["verification"]?["unrecognized_fields"]
                == .array([
                    .string("postback-sequence-index"), .string("coarse-conversion-value"), .string("fidelity-type"),
                ]))
        // Told apart from the first postback of the same install by its index's text.
        #expect(record.dedupeKey.hasSuffix("3"))

        // Not signed by Apple: kept as the forgery it is (quarantined), and so counted
        // among the signature verdicts rather than hidden behind a value refused.
        let forged = try #require(try normalize(try signed(fields, order: order, with: otherKey)))
        #expect(forged.signature == "invalid" && forged.fidelityType == nil)
        #expect(
            forged.raw?["verification"]?["unrecognized_fields"] == record.raw?["verification"]?["unrecognized_fields"])
        // A version not known here: stored, unverifiable.
        var future = fields
        future["version"] = .string("5.0")
        let unverifiable = try #require(try normalize(try signed(future, order: order)))
        #expect(unverifiable.signature == "unverifiable" && unverifiable.coarseValue == nil)
        #expect(unverifiable.raw?["verification"]?["unrecognized_fields"] != nil)
        // Refused only where the operator asked for refusals, and then for its signature.
        options.onInvalidSignature = .reject
        #expect {
            try SKAdNetworkProvider(options: options).normalize(
                IngestPayload(
                    body: try JSONEncoder().encode(JSONValue.object(try signed(fields, order: order, with: otherKey))),
                    receivedAt: Date(), path: "/.well-known/skadnetwork/report-attribution"))
        } throws: { error in
            (error as? GatewayError)?.code == .invalidSignature
        }
    }

    /// The apps a payload claims are read as `normalize` reads them, from SKAN's `app-id`
    /// and AdAttributionKit's claims, whatever the signatures say: they decide whether the
    /// caller may have the postbacks verified at all.
    @Test func theClaimedAppsAreThoseTheRecordsWouldHave() throws {
        var options = SKAdNetworkProvider.Options()
        options.keys = keys
        let provider = SKAdNetworkProvider(options: options)
        let forgedAAK = try jws(kid: "test-network/0", claims: Self.claims, signer: otherKey)
        let array: JSONValue = .array([
            .object(try signed(Self.base.merging(["version": .string("3.0")]) { $1 }, order: Self.v3Order)),
            .object(["jws-string": .string(forgedAAK)]),
            .object(Self.base.merging(["app-id": .string("999"), "attribution-signature": .string("AAAA")]) { $1 }),
        ])
        let payload = IngestPayload(
            body: try JSONEncoder().encode(array), receivedAt: Date(), path: "/v1/skadnetwork/postbacks")
        #expect(try provider.claimedAppIDs(payload) == ["525463029", "525463029", "999"])
        #expect(try provider.normalize(payload).map(\.appID) == ["525463029", "525463029", "999"])
    }

    /// An AdAttributionKit postback's record: the signed index held to Apple's windows,
    /// the conversion type as signed, and the unsigned interaction type only as Apple
    /// defines it.
    @Test func adAttributionKitRecordsTakeOnlyValuesTheyKnow() throws {
        var options = SKAdNetworkProvider.Options()
        options.keys = keys
        options.conversionModel = ConversionModel(windows: [
            0: .init(fine: [], coarse: ["low": .init(events: ["session"])]),
            1: .init(fine: [], coarse: ["low": .init(events: ["retained"])]),
        ])
        let provider = SKAdNetworkProvider(options: options)
        func record(_ claims: String, interaction: String = "click", country: String = "US") throws
            -> AttributionRecord
        {
            let body: JSONValue = .object([
                "jws-string": .string(try jws(kid: "test-network/0", claims: claims)),
                "coarse-conversion-value": .string("low"), "ad-interaction-type": .string(interaction),
                "country-code": .string(country),
            ])
            return try #require(
                try provider.normalize(
                    IngestPayload(
                        body: try JSONEncoder().encode(body), receivedAt: Date(),
                        path: "/.well-known/appattribution/report-attribution/")
                ).first)
        }
        let download = try record(Self.claims)
        #expect(download.signature == "verified" && download.postbackSequenceIndex == 1)
        #expect(download.conversionType == "Download" && download.redownload == false && download.fidelityType == 1)
        #expect(download.events == ["retained"] && download.countryOrRegion == "US")

        let reengagement = try record(
            Self.claims.replacingOccurrences(of: #""download""#, with: #""re-engagement""#), interaction: "view")
        #expect(reengagement.conversionType == "ReEngagement" && reengagement.redownload == nil)
        #expect(reengagement.fidelityType == 0)

        // An index past Apple's three windows, and an interaction type Apple does not
        // define, are left out and named; the model is not read for an unknown window.
        let unknown = try record(
            Self.claims.replacingOccurrences(of: #""postback-sequence-index":1"#, with: #""postback-sequence-index":7"#)
                .replacingOccurrences(of: #""download""#, with: #""pre-order""#),
            interaction: "banana", country: "USA")
        #expect(unknown.conversionType == nil && unknown.redownload == nil)
        #expect(unknown.postbackSequenceIndex == nil && unknown.fidelityType == nil && unknown.events == nil)
        #expect(unknown.countryOrRegion == nil)
        #expect(
            unknown.raw?["verification"]?["unrecognized_fields"]
                == .array([
                    .string("postback-sequence-index"), .string("conversion-type"), .string("country-code"),
                    .string("ad-interaction-type"),
                ]))
    }

    /// SKAN 3.0 signs no sequence index: copies of a genuine postback with one made up
    /// must stay duplicates of it, not become records of their own.
    @Test func anUnsignedSequenceIndexCannotMakeCopiesOfAVerifiedPostback() throws {
        var options = SKAdNetworkProvider.Options()
        options.keys = keys
        let provider = SKAdNetworkProvider(options: options)
        let genuine = try v3()
        var keys: Set<String> = []
        for index in [nil, "3", "x1", "", "2"] as [String?] {
            var copy = genuine
            if let index { copy["postback-sequence-index"] = .string(index) }
            let record = try #require(
                try provider.normalize(
                    IngestPayload(
                        body: try JSONEncoder().encode(JSONValue.object(copy)), receivedAt: Date(),
                        path: "/.well-known/skadnetwork/report-attribution")
                ).first)
            #expect(record.signature == "verified")
            keys.insert(record.dedupeKey)
        }
        #expect(keys.count == 1, "\(keys)")
    }

    /// A postback this gateway cannot verify (a key or a version it does not know) may be
    /// Apple's genuine one: a forgery with the same transaction sent first must not make
    /// it a duplicate. A device's retry of the same body still is one.
    @Test func aForgedPostbackItCannotVerifyDoesNotSwallowTheGenuineOne() throws {
        let provider = SKAdNetworkProvider(
            options: {
                var o = SKAdNetworkProvider.Options(); o.keys = keys; return o
            }())
        func key(_ postback: [String: JSONValue]) throws -> String {
            let record = try #require(
                try provider.normalize(
                    IngestPayload(
                        body: try JSONEncoder().encode(JSONValue.object(postback)), receivedAt: Date(),
                        path: "/.well-known/skadnetwork/report-attribution")
                ).first)
            return record.dedupeKey
        }
        var genuine = try v3()
        genuine["version"] = .string("5.0")
        var forged = genuine
        forged["redownload"] = .bool(true)
        forged["attribution-signature"] = .string("MEUCIQDforgedforgedforgedforgedforgedforgedforgedAAAA")
        #expect(try key(forged) != key(genuine))
        #expect(try key(genuine) == key(genuine))
        // The same for invalid ones: two forgeries of one transaction are two records.
        forged["version"] = .string("3.0")
        var other = forged
        other["app-id"] = .integer(1)
        #expect(try key(forged) != key(other))
        #expect(try key(forged) == key(forged))
    }

    @Test func invalidPostbacksAreRefusedOrQuarantinedAsConfigured() throws {
        var tampered = try v3()
        tampered["redownload"] = .bool(true)
        let body = try JSONEncoder().encode(JSONValue.array([.object(try v3()), .object(tampered)]))
        let payload = IngestPayload(body: body, receivedAt: Date(), path: "/v1/skadnetwork/postbacks")

        var options = SKAdNetworkProvider.Options()
        options.keys = keys
        let records = try SKAdNetworkProvider(options: options).normalize(payload)
        #expect(records.map(\.signature) == ["verified", "invalid"])

        options.onInvalidSignature = .reject
        #expect { try SKAdNetworkProvider(options: options).normalize(payload) } throws: { error in
            let error = error as? GatewayError
            return error?.code == .invalidSignature && error?.field == "[1].attribution-signature"
        }
        // A signed field missing is named itself, not the signature over it.
        var missing = try v3()
        missing["transaction-id"] = nil
        let body2 = try JSONEncoder().encode(JSONValue.array([.object(missing)]))
        #expect {
            try SKAdNetworkProvider(options: options).normalize(
                IngestPayload(body: body2, receivedAt: Date(), path: "/v1/skadnetwork/postbacks"))
        } throws: { error in
            (error as? GatewayError)?.field == "[0].transaction-id"
        }
    }

    /// A body that is no postback at all gets a `4xx` naming what it lacks, whatever
    /// `on_invalid_signature` says: quarantine keeps postbacks whose signature fails, not
    /// anything posted to a route that takes no key.
    @Test func aBodyThatIsNoPostbackIsRefusedNamingWhatItLacks() throws {
        func refusal(_ body: String, path: String = SKAdNetworkProvider.skanCopyPath) -> GatewayError? {
            let payload = IngestPayload(body: Data(body.utf8), receivedAt: Date(), path: path)
            do {
                _ = try SKAdNetworkProvider(options: .init()).normalize(payload)
                return nil
            } catch { return error as? GatewayError }
        }
        func base64URL(_ text: String) -> String {
            Data(text.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        }
        #expect(refusal("{}")?.field == "ad-network-id")
        #expect(refusal(#"{"foo":3}"#)?.code == .missingField)
        let noSignature = try JSONEncoder().encode(JSONValue.object(Self.base))
        #expect(refusal(String(decoding: noSignature, as: UTF8.self))?.field == "attribution-signature")
        // A field Apple sends as text or a number, sent as an object or a list, is refused too.
        for (field, value) in [
            ("transaction-id", JSONValue.object(["a": .integer(1)])), ("app-id", .array([.integer(1)])),
            // Optional ones too: a `version` of `{}` had read as 1.0.
            ("version", .object([:])), ("source-app-id", .array([])), ("campaign-id", .object(["id": .integer(4)])),
        ] {
            var odd = Self.base
            odd["attribution-signature"] = .string("MEUCIQ")
            odd[field] = value
            let body = String(decoding: try JSONEncoder().encode(JSONValue.object(odd)), as: UTF8.self)
            #expect(refusal(body)?.code == .invalidField && refusal(body)?.field == field, "\(field)")
        }
        let aak = SKAdNetworkProvider.aakCopyPath
        #expect(refusal("{}", path: aak)?.field == "jws-string")
        #expect(refusal(#"{"jws-string":"a.b.c"}"#, path: aak)?.field == "jws-string")
        let claims = base64URL(#"{"did-win":true,"postback-identifier":"p-1"}"#)
        let jws = base64URL(#"{"alg":"ES256","kid":"x"}"#) + "." + claims + ".c2ln"
        #expect(refusal(#"{"jws-string":"\#(jws)"}"#, path: aak)?.field == "jws-string.ad-network-identifier")
        // A NUL in the JWS's header or claims, stored and echoed too, is refused as in any body.
        let full = base64URL(
            #"{"ad-network-identifier":"a","advertised-item-identifier":1,"postback-identifier":"p\u0000"}"#)
        let nulClaim = base64URL(#"{"alg":"ES256","kid":"x"}"#) + "." + full + ".c2ln"
        #expect(refusal(#"{"jws-string":"\#(nulClaim)"}"#, path: aak)?.field == "jws-string.postback-identifier")
        let fine = base64URL(#"{"ad-network-identifier":"a","advertised-item-identifier":1,"postback-identifier":"p"}"#)
        let nulKid = base64URL(#"{"alg":"ES256","kid":"k\u0000"}"#) + "." + fine + ".c2ln"
        #expect(refusal(#"{"jws-string":"\#(nulKid)"}"#, path: aak)?.field == "jws-string.kid")
    }

    /// Apple sends a fine value or a coarse one: a postback with both is not Apple's as sent.
    @Test func aPostbackWithAFineAndACoarseValueIsRefused() throws {
        var postback = try v3()
        postback["conversion-value"] = .integer(63)
        postback["coarse-conversion-value"] = .string("high")
        let body = try JSONEncoder().encode(JSONValue.object(postback))
        #expect {
            try SKAdNetworkProvider(options: .init()).normalize(
                IngestPayload(body: body, receivedAt: Date(), path: SKAdNetworkProvider.skanCopyPath))
        } throws: { error in
            (error as? GatewayError)?.field == "coarse-conversion-value"
        }
        postback["coarse-conversion-value"] = nil
        let fineOnly = try JSONEncoder().encode(JSONValue.object(postback))
        let record = try SKAdNetworkProvider(options: .init()).normalize(
            IngestPayload(body: fineOnly, receivedAt: Date(), path: SKAdNetworkProvider.skanCopyPath))
        #expect(record.first?.fineValue == 63)
    }
}
