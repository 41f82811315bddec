import Foundation
import GatewayCore

/// SKAdNetwork (1.0–4.0) and AdAttributionKit install-validation postbacks: verified
/// against Apple's keys, deduplicated, and normalised into `postback` records.
///
/// Apple's developer copies arrive on the `.well-known` paths (with and without the
/// trailing slash); ad networks and backends forward one postback or an array to
/// `/v1/skadnetwork/postbacks`. Every record says its verdict in `signature` and, in
/// `raw.verification`, which fields the signature covers: conversion values never are.
public struct SKAdNetworkProvider: PostbackProvider {
    public static let typeName = "skadnetwork"
    public var name: String { Self.typeName }

    public enum InvalidSignaturePolicy: String, Sendable, CaseIterable {
        /// Answer `422 invalid_signature`; nothing is stored.
        case reject
        /// Store it with `signature: invalid`, for audit; only routes with
        /// `where: { quarantined: true }` get it.
        case quarantine
    }

    public struct Options: Sendable {
        public var keys = PostbackKeys.apple
        public var onInvalidSignature = InvalidSignaturePolicy.quarantine
        /// Decodes conversion values into events and revenue, and serves the
        /// conversion-value route.
        public var conversionModel: ConversionModel?
        /// `quarantine_max_mb`: the most the store keeps of postbacks that did not verify;
        /// past it the oldest are dropped. Default 64 MiB.
        public var quarantineMaxBytes = 64 << 20
        public init() {}
    }

    static let skanCopyPath = "/.well-known/skadnetwork/report-attribution/"
    static let aakCopyPath = "/.well-known/appattribution/report-attribution/"
    static let forwardPath = "/v1/skadnetwork/postbacks"
    /// The most postbacks one forwarded array may hold: each is verified, and a P-192
    /// signature (SKAN 2) costs about 0.4 ms, so this bounds one request's work to tens of
    /// milliseconds of CPU.
    static let maxBatch = 100

    public let options: Options
    public var quarantineMaxBytes: Int { options.quarantineMaxBytes }

    public init(options: Options = Options()) {
        self.options = options
    }

    /// The largest postback Apple's devices' routes read: a real one (an AdAttributionKit
    /// JWS the largest) is under 2 KB, and an unverifiable postback from anyone is kept, with
    /// its record and the sinks' rows, so a higher limit only lets strangers spend more disk.
    public static let maxOpenBody = 4 * 1024

    public var routes: [ProviderRoute] {
        [
            // Apple's devices: authenticated by Apple's signature, and answered 200. The
            // router matches these with and without the trailing slash. Open to anyone, and
            // an unverifiable postback is kept (quarantined) whole: a postback is under 2 KB,
            // and at the server's 1 MiB a request anyone could fill the disk fast.
            ProviderRoute(
                .post, Self.skanCopyPath, requiresAPIKey: false, acceptedStatus: 200, maxBodyBytes: Self.maxOpenBody),
            ProviderRoute(
                .post, Self.aakCopyPath, requiresAPIKey: false, acceptedStatus: 200, maxBodyBytes: Self.maxOpenBody),
            // Ad networks and backends: an app never forwards postbacks itself.
            ProviderRoute(.post, Self.forwardPath, keyScope: .backend),
        ]
    }

    public func normalize(_ payload: IngestPayload) throws -> [AttributionRecord] {
        let isAAKPath = payload.path.hasPrefix(String(Self.aakCopyPath.dropLast()))
        return try postbacks(payload).map { prefix, object in
            if isAAKPath || object["jws-string"] != nil {
                return try aakRecord(object, prefix: prefix, receivedAt: payload.receivedAt)
            }
            return try skanRecord(object, prefix: prefix, receivedAt: payload.receivedAt)
        }
    }

    /// The apps the postbacks name, as `normalize` reads them but with no signature
    /// verified (an AdAttributionKit JWS's claims decoded unchecked). The body is parsed
    /// twice, which costs far less than the verification it may spare.
    public func claimedAppIDs(_ payload: IngestPayload) throws -> [String?]? {
        let isAAKPath = payload.path.hasPrefix(String(Self.aakCopyPath.dropLast()))
        return try postbacks(payload).map { _, object in
            if isAAKPath || object["jws-string"] != nil {
                return SKANSignature.text(AAKSignature.unverifiedClaims(object)["advertised-item-identifier"])
            }
            return SKANSignature.text(object["app-id"])
        }
    }

    /// The postback objects of a body, each with the prefix that names its fields.
    func postbacks(_ payload: IngestPayload) throws -> [(prefix: String, object: [String: JSONValue])] {
        let value: JSONValue
        do {
            value = try JSONValue.parse(payload.body)
        } catch {
            throw GatewayError(.malformedJSON, "the body is not valid JSON")
        }
        try PayloadFields.refuseNUL(in: value)
        let items: [(prefix: String, object: [String: JSONValue])]
        switch value {
        case .object(let object):
            items = [("", object)]
        case .array(let array) where payload.path == Self.forwardPath || payload.path.isEmpty:
            guard !array.isEmpty else { throw GatewayError(.invalidField, "the array holds no postback") }
            guard array.count <= Self.maxBatch else {
                throw GatewayError(.invalidField, "at most \(Self.maxBatch) postbacks per request")
            }
            items = try array.enumerated().map { index, item in
                guard case .object(let object) = item else {
                    throw GatewayError.invalid("[\(index)]", "expected a postback object, found \(item.typeName)")
                }
                return ("[\(index)].", object)
            }
        default:
            throw GatewayError(.malformedJSON, "expected a JSON object, found \(value.typeName)")
        }
        return items
    }

    /// The verdict for one postback body, SKAN or AdAttributionKit.
    public func verify(_ object: [String: JSONValue]) -> PostbackVerdict {
        object["jws-string"] != nil
            ? AAKSignature.verify(object, keys: options.keys).verdict
            : SKANSignature.verify(object, keys: options.keys)
    }

    // MARK: SKAdNetwork

    func skanRecord(_ object: [String: JSONValue], prefix: String, receivedAt: Date) throws -> AttributionRecord {
        try Self.requireFields(Self.skanRequired, in: object, prefix: prefix)
        try Self.refuseNonScalar(Self.skanOptional, in: object, prefix: prefix)
        let verdict = SKANSignature.verify(object, keys: options.keys)
        try enforce(verdict, prefix: prefix, signature: "attribution-signature")
        let fields = PayloadFields(object, path: String(prefix.dropLast()))
        let text = { (key: String) in try Self.limited(SKANSignature.text(object[key]), field: prefix + key) }
        let verified = verdict.outcome == .verified
        var values = PostbackValues()
        // A verified postback vouches only for what Apple signed, and the first copy of a
        // postback keeps its key: a relay's copy with an unsigned field added or changed
        // (a 2.1 `did-win: false`, a 3.0 `source-identifier`) would otherwise stand for
        // Apple's own. Such fields stay in `raw`, listed as unsigned.
        func isVouched(_ key: String) -> Bool { !verified || verdict.signedFields.contains(key) }
        func vouched(_ key: String) throws -> String? { isVouched(key) ? try text(key) : nil }
        let transactionID = try text("transaction-id")
        let sequence =
            isVouched("postback-sequence-index")
            ? try values.read("postback-sequence-index") { try fields.int("postback-sequence-index", in: 0...2) } : nil
        // `did-win` is signed from 3.0 only. A 2.2 copy with `did-win: false` and a source
        // app added verifies too: the flag drops the source app from the signed message.
        let didWin = isVouched("did-win") ? SKANSignature.boolValue(object["did-win"]) : nil
        // A verified postback's index keys it only when the signature covers it (SKAN 4):
        // SKAN 3.0 and before sign none, and one added on the open routes would make a
        // record per made-up value. One not known here keys by its text.
        let sequenceKey: String
        if verified && !verdict.signedFields.contains("postback-sequence-index") {
            sequenceKey = "0"
        } else {
            let text = SKANSignature.text(object["postback-sequence-index"]).flatMap { $0.isEmpty ? nil : $0 }
            sequenceKey = sequence.map(String.init) ?? text ?? "0"
        }
        let dedupeKey =
            transactionID.map { DedupeKey.make("skan", $0, sequenceKey) }
            ?? Self.unkeyed("skan", object)
        var record = AttributionRecord(
            provider: name, kind: .postback, dedupeKey: Self.dedupeKey(dedupeKey, verdict, object),
            receivedAt: receivedAt,
            attributed: didWin ?? true)
        record.skanVersion = verdict.version
        record.adNetworkID = try text("ad-network-id")
        record.appID = try text("app-id")
        record.transactionID = transactionID
        record.sourceAppID = try vouched("source-app-id")
        // SKAN 4's source-identifier replaced the 2-digit campaign-id of earlier versions.
        record.sourceIdentifier = try vouched("source-identifier") ?? vouched("campaign-id")
        record.sourceDomain = try vouched("source-domain")
        // Apple never signs conversion values: they are the postback's as received.
        record.fineValue = try values.read("conversion-value") { try fields.int("conversion-value", in: 0...63) }
        record.coarseValue = try values.read("coarse-conversion-value") { try coarse(fields) }
        try Self.refuseBothValues(record, prefix: prefix)
        record.postbackSequenceIndex = sequence
        Self.leaveOutValuesAppleCannotSend(&record, &values)
        record.didWin = didWin
        record.fidelityType =
            isVouched("fidelity-type")
            ? try values.read("fidelity-type") { try fields.int("fidelity-type", in: 0...1) } : nil
        record.redownload = isVouched("redownload") ? SKANSignature.boolValue(object["redownload"]) : nil
        record.signature = verdict.outcome.rawValue
        // Apple's test postbacks carry source-app-id and conversion-value 0; the source app
        // counts only where it is signed (a winning postback of 2.0 on), or a relay could
        // make any install a test, which default routes leave out.
        record.isTest = record.sourceAppID == "0" && record.fineValue == 0
        // Apple's 2.2 test postbacks carry the mark unsigned: an install by default, yet
        // said, so that a sink or an analyst can set them apart (a relay can write it too).
        let unsignedTestMark =
            !record.isTest && record.fineValue == 0
            && !isVouched("source-app-id") && SKANSignature.text(object["source-app-id"]) == "0"
        record.raw = raw(object, verdict, unrecognized: values.unrecognized, unsignedTestMark: unsignedTestMark)
        // A window not known here has no meaning in the model.
        if !values.unrecognized.contains("postback-sequence-index") { options.conversionModel?.decode(&record) }
        return record
    }

    // MARK: AdAttributionKit

    func aakRecord(_ object: [String: JSONValue], prefix: String, receivedAt: Date) throws -> AttributionRecord {
        try Self.requireFields(["jws-string"], in: object, prefix: prefix)
        let unverified = AAKSignature.unverifiedClaims(object)
        guard !unverified.isEmpty else {
            throw GatewayError.invalid(
                prefix + "jws-string", "expected a JWS: header.payload.signature, base64url JSON")
        }
        try Self.requireFields(Self.aakRequired, in: unverified, prefix: prefix + "jws-string.")
        // The JWS's parts are JSON of their own, stored and echoed (an unknown `kid`) too.
        try PayloadFields.refuseNUL(in: .object(AAKSignature.unverifiedHeader(object)), path: prefix + "jws-string")
        try PayloadFields.refuseNUL(in: .object(unverified), path: prefix + "jws-string")
        let decoded = AAKSignature.verify(object, keys: options.keys)
        try enforce(decoded.verdict, prefix: prefix, signature: "jws-string")
        let claims = decoded.claims
        let fields = PayloadFields(object, path: String(prefix.dropLast()))
        var values = PostbackValues()
        let claim = { (key: String) in
            try Self.limited(SKANSignature.text(claims[key]), field: prefix + "jws-string." + key)
        }
        let postbackID = try claim("postback-identifier")
        let didWin = SKANSignature.boolValue(claims["did-win"])
        var record = AttributionRecord(
            provider: name, kind: .postback,
            dedupeKey: Self.dedupeKey(
                postbackID.map { DedupeKey.make("aak", $0) } ?? Self.unkeyed("aak", object), decoded.verdict, object),
            receivedAt: receivedAt, attributed: didWin ?? true)
        record.skanVersion = "aak"
        record.adNetworkID = try claim("ad-network-identifier")
        record.appID = try claim("advertised-item-identifier")
        record.transactionID = postbackID
        record.sourceIdentifier = try claim("source-identifier")
        record.sourceAppID = try claim("publisher-item-identifier")
        let signed = PayloadFields(claims, path: prefix + "jws-string")
        record.postbackSequenceIndex = try values.read("postback-sequence-index") {
            try signed.int("postback-sequence-index", in: 0...2)
        }
        record.didWin = didWin
        // `download`, `redownload` or `re-engagement` (AdAttributionKit 2), written as
        // AdServices writes its own (`Download`, `Redownload`), so that one column holds one
        // spelling; a re-engagement is no download at all, so it says nothing of `redownload`.
        record.conversionType = try values.read("conversion-type") {
            guard let type = try claim("conversion-type") else { return nil }
            guard let spelled = Self.conversionTypes[type] else {
                throw GatewayError.invalid(
                    prefix + "jws-string.conversion-type", "expected download, redownload or re-engagement")
            }
            return spelled
        }
        record.redownload = record.conversionType.flatMap { ["Download": false, "Redownload": true][$0] }
        record.fineValue = try values.read("conversion-value") { try fields.int("conversion-value", in: 0...63) }
        record.coarseValue = try values.read("coarse-conversion-value") { try coarse(fields) }
        try Self.refuseBothValues(record, prefix: prefix)
        Self.leaveOutValuesAppleCannotSend(&record, &values)
        // Like conversion values, these two sit outside the JWS in Apple's own format: no
        // signature covers them, so they are the postback's as received.
        record.countryOrRegion = try values.read("country-code") {
            guard let code = try fields.string("country-code") else { return nil }
            // Apple's two capital letters; anything else would count as no country in the report.
            guard code.utf8.count == 2, code.utf8.allSatisfy({ (65...90).contains($0) }) else {
                throw GatewayError.invalid(fields.fieldPath("country-code"), "expected two capital letters")
            }
            return code
        }
        record.fidelityType = try values.read("ad-interaction-type") {
            guard let type = try fields.string("ad-interaction-type") else { return nil }
            guard let fidelity = ["view": 0, "click": 1][type] else {
                throw GatewayError.invalid(fields.fieldPath("ad-interaction-type"), "expected view or click")
            }
            return fidelity
        }
        record.signature = decoded.verdict.outcome.rawValue
        // Postbacks made in developer settings come from this ad network.
        record.isTest = record.adNetworkID == "development.adattributionkit"
        record.raw = raw(object, decoded.verdict, claims: claims, unrecognized: values.unrecognized)
        // A window not known here has no meaning in the model.
        if !values.unrecognized.contains("postback-sequence-index") { options.conversionModel?.decode(&record) }
        return record
    }

    /// What every postback of every version carries: a body without one is no postback, and
    /// gets a `4xx` whatever `on_invalid_signature` says (quarantine keeps postbacks whose
    /// signature fails, not anything posted to an open route).
    static let skanRequired = ["ad-network-id", "app-id", "transaction-id", "attribution-signature"]
    /// The fields a SKAdNetwork postback may leave out that Apple sends as text or a number:
    /// an object or a list there would read as absent (a `version` of `{}` as 1.0).
    static let skanOptional = ["version", "campaign-id", "source-identifier", "source-app-id", "source-domain"]
    /// The same for an AdAttributionKit JWS's claims.
    static let aakRequired = ["ad-network-identifier", "advertised-item-identifier", "postback-identifier"]

    /// Apple sends a fine value or a coarse one, never both: a postback with both was
    /// written by someone else, and neither value can be told to be Apple's.
    static func refuseBothValues(_ record: AttributionRecord, prefix: String) throws {
        guard record.fineValue != nil, record.coarseValue != nil else { return }
        throw GatewayError.invalid(
            prefix + "coarse-conversion-value",
            "a postback carries conversion-value or coarse-conversion-value, not both")
    }

    /// Apple sends a fine value only in the first window's postback, and a coarse one from
    /// SKAN 4 on (AdAttributionKit's included): one elsewhere was not Apple's, and the
    /// model would read it as a conversion. Left out and named, as an unknown value is.
    static func leaveOutValuesAppleCannotSend(_ record: inout AttributionRecord, _ values: inout PostbackValues) {
        if record.fineValue != nil, let index = record.postbackSequenceIndex, index > 0 {
            record.fineValue = nil
            values.leaveOut("conversion-value")
        }
        if record.coarseValue != nil, let version = record.skanVersion, version != "aak",
            (Double(version) ?? 0) < 4
        {
            record.coarseValue = nil
            values.leaveOut("coarse-conversion-value")
        }
    }

    static func requireFields(_ keys: [String], in object: [String: JSONValue], prefix: String) throws {
        for key in keys {
            switch object[key] {
            case nil, .null: throw GatewayError.missing(prefix + key)
            case .string(let text) where text.isEmpty: throw GatewayError.missing(prefix + key)
            // Apple sends each as text or a number; stored, it would key no record.
            case .object, .array: try refuseNonScalar([key], in: object, prefix: prefix)
            default: continue
            }
        }
    }

    /// Refuses an object or a list in any of `keys`, which Apple sends as text or a number.
    static func refuseNonScalar(_ keys: [String], in object: [String: JSONValue], prefix: String) throws {
        for key in keys {
            switch object[key] {
            case .object, .array:
                throw GatewayError.invalid(
                    prefix + key, "expected a string or a number, found \(object[key]!.typeName)")
            default: continue
            }
        }
    }

    /// AdAttributionKit's conversion types, as AdServices spells its own.
    static let conversionTypes = ["download": "Download", "redownload": "Redownload", "re-engagement": "ReEngagement"]

    // MARK: shared

    /// A postback that did not verify gets a key of its own kind and content, so that a
    /// forged copy sent first (these routes take no API key) cannot make Apple's genuine
    /// one a duplicate, whether it verifies or, signed with a key or in a version this
    /// gateway does not know, cannot be verified either; copies of the same unverified
    /// postback (a device's retries) still find each other.
    static func dedupeKey(_ key: String, _ verdict: PostbackVerdict, _ object: [String: JSONValue]) -> String {
        guard verdict.outcome != .verified else { return key }
        return key + ":" + verdict.outcome.rawValue + ":" + String(unkeyed("body", object).suffix(16))
    }

    /// `text`, refused past the length every other provider's fields are held to: these
    /// are read from the postback as signed, not through ``PayloadFields/string(_:)``.
    static func limited(_ text: String?, field: String) throws -> String? {
        try text.map { try PayloadFields.limited($0, field: field) }
    }

    func enforce(_ verdict: PostbackVerdict, prefix: String, signature: String) throws {
        guard verdict.outcome == .invalid, options.onInvalidSignature == .reject else { return }
        // A signed field that is missing is the field to name, not the signature.
        let reason = verdict.reason ?? "bad signature"
        let missing = reason.hasPrefix("missing field ") ? String(reason.dropFirst("missing field ".count)) : nil
        throw GatewayError(
            .invalidSignature, "the postback's signature does not verify (\(reason))",
            field: prefix + (missing ?? signature))
    }

    func coarse(_ fields: PayloadFields) throws -> String? {
        guard let value = try fields.string("coarse-conversion-value") else { return nil }
        guard ["low", "medium", "high"].contains(value) else {
            throw GatewayError.invalid(fields.fieldPath("coarse-conversion-value"), "expected low, medium or high")
        }
        return value
    }

    /// The postback as received, and what its signature covers.
    ///
    /// A postback that did not verify keeps the postback once, with the verdict and its
    /// reason: the field lists and an AdAttributionKit JWS's decoded claims follow from the
    /// postback itself, and on routes anyone may post to, the list of unsigned fields would
    /// repeat every field a sender made up.
    func raw(
        _ object: [String: JSONValue], _ verdict: PostbackVerdict, claims: [String: JSONValue]? = nil,
        unrecognized: [String] = [], unsignedTestMark: Bool = false
    ) -> JSONValue {
        let verified = verdict.outcome == .verified
        var verification: [String: JSONValue] = [
            "verdict": .string(verdict.outcome.rawValue), "version": .string(verdict.version),
        ]
        if verified {
            verification["signed_fields"] = .array(verdict.signedFields.map(JSONValue.string))
            verification["unsigned_fields"] = .array(
                object.keys.filter {
                    !verdict.signedFields.contains($0) && $0 != "attribution-signature" && $0 != "jws-string"
                }
                .sorted().map(JSONValue.string))
        }
        if let reason = verdict.reason { verification["reason"] = .string(reason) }
        if !unrecognized.isEmpty { verification["unrecognized_fields"] = .array(unrecognized.map(JSONValue.string)) }
        if unsignedTestMark { verification["unsigned_test_mark"] = .bool(true) }
        var raw: [String: JSONValue] = ["postback": .object(object), "verification": .object(verification)]
        if let claims, verified { raw["claims"] = .object(claims) }
        return .object(raw)
    }

    /// A key for postbacks without their id: only a byte-identical copy matches it.
    static func unkeyed(_ kind: String, _ object: [String: JSONValue]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let data = (try? encoder.encode(JSONValue.object(object))) ?? Data()
        return "\(kind):unkeyed:" + SHA256Text.hex(data)
    }
}
