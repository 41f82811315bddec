import Crypto
import Foundation
import GatewayCore

/// Verifies SKAdNetwork postbacks (1.0 to 4.0) the way Apple signs them: the values of a
/// fixed list of fields per version, byte for byte as received, joined by U+2063; ECDSA
/// with SHA-256 (P-192 for 1.0 and 2.0, P-256 after), the signature DER in base64.
///
/// The message is never built from "whatever fields are present": forwarders add
/// unsigned keys, and real 1.0 postbacks carry a `version` that is not signed.
enum SKANSignature {
    static let separator = "\u{2063}"
    static let separatorScalar: Unicode.Scalar = "\u{2063}"

    /// The signed fields of `postback`, in order, or nil for an unknown version.
    static func signedFields(version: String, _ postback: [String: JSONValue]) -> [String]? {
        signedFields(version: version, postback, sourceAppSigned: nil)
    }

    /// The layouts `postback` may have been signed with, the likelier first. A 2.2 or 3.0
    /// postback's `source-app-id` is signed in a winning postback and not in a nonwinning
    /// one; in 2.2 `did-win` itself is not signed, so a relay that adds or changes it must
    /// not make a genuine postback invalid: both layouts are tried.
    static func signedLayouts(version: String, _ postback: [String: JSONValue]) -> [[String]]? {
        guard let likely = signedFields(version: version, postback) else { return nil }
        let sourceApp = postback["source-app-id"] != nil && postback["source-app-id"] != .null
        guard sourceApp, version == "2.2" || version == "3.0" else { return [likely] }
        let signed = likely.contains("source-app-id")
        return [likely, signedFields(version: version, postback, sourceAppSigned: !signed)].compactMap { $0 }
    }

    /// With `sourceAppSigned` nil, `source-app-id` (when present) is taken as signed unless
    /// the postback says it did not win.
    private static func signedFields(version: String, _ postback: [String: JSONValue], sourceAppSigned: Bool?)
        -> [String]?
    {
        let didWin = boolValue(postback["did-win"])
        let sourceApp = postback["source-app-id"] != nil && postback["source-app-id"] != .null
        // Nonwinning postbacks carry no authenticated source app (Apple's 2.2 test-mode
        // postbacks still send `source-app-id: 0`, unsigned).
        let signedSourceApp = sourceApp && (sourceAppSigned ?? (didWin != false)) ? ["source-app-id"] : []
        let base = ["version", "ad-network-id", "campaign-id", "app-id", "transaction-id", "redownload"]
        switch version {
        case "1.0": return ["ad-network-id", "campaign-id", "app-id", "transaction-id"]
        case "2.0", "2.1": return base + (sourceApp ? ["source-app-id"] : [])
        case "2.2": return base + signedSourceApp + ["fidelity-type"]
        case "3.0": return base + signedSourceApp + ["fidelity-type", "did-win"]
        case "4.0":
            // A web ad's domain takes the source app's place, and like it only in a winning
            // postback: one a relay adds to a nonwinning postback is unsigned.
            let signedDomain = didWin != false && postback["source-domain"] != nil ? ["source-domain"] : []
            let source = signedSourceApp.isEmpty ? signedDomain : signedSourceApp
            return ["version", "ad-network-id", "source-identifier", "app-id", "transaction-id", "redownload"]
                + source + ["fidelity-type", "did-win", "postback-sequence-index"]
        default: return nil
        }
    }

    /// 1.0 postbacks in the wild carry `"version": "1.0"` (unsigned) or none at all.
    static func version(_ postback: [String: JSONValue]) -> String {
        if case .double(let number)? = postback["version"] { return String(number) }
        return text(postback["version"]) ?? "1.0"
    }

    static func verify(_ postback: [String: JSONValue], keys: PostbackKeys) -> PostbackVerdict {
        let version = version(postback)
        guard let layouts = signedLayouts(version: version, postback) else {
            return PostbackVerdict(.unverifiable, version: version, reason: "unknown version")
        }
        // The first layout that verifies; else what the likeliest one found.
        var first: PostbackVerdict?
        for fields in layouts {
            let verdict = verify(postback, version: version, fields: fields, keys: keys)
            if verdict.outcome == .verified { return verdict }
            first = first ?? verdict
        }
        return first!
    }

    private static func verify(
        _ postback: [String: JSONValue], version: String, fields: [String], keys: PostbackKeys
    ) -> PostbackVerdict {
        var values: [String] = []
        for field in fields {
            guard let value = text(postback[field]) else {
                return PostbackVerdict(
                    .invalid, version: version, reason: "missing field \(field)", signedFields: fields)
            }
            // The message joins the values with this character: one inside a value would
            // move a field boundary without changing a byte, so that a genuine signature
            // verified values Apple never signed (another version's fields, a transaction
            // id with the next field folded in). Apple's values never hold it.
            guard !value.unicodeScalars.contains(separatorScalar) else {
                return PostbackVerdict(
                    .invalid, version: version, reason: "field \(field) holds U+2063, the separator of signed fields",
                    signedFields: fields)
            }
            values.append(value)
        }
        guard let encoded = text(postback["attribution-signature"]) else {
            return PostbackVerdict(
                .invalid, version: version, reason: "missing field attribution-signature", signedFields: fields)
        }
        guard let signature = Data(base64Encoded: encoded) else {
            return PostbackVerdict(.invalid, version: version, reason: "signature is not base64", signedFields: fields)
        }
        let message = Data(values.joined(separator: separator).utf8)
        let valid: Bool
        if version == "1.0" || version == "2.0" {
            valid = P192Verifier.verify(signature: signature, message: message, spki: keys.skanP192)
        } else {
            guard let der = try? P256.Signing.ECDSASignature(derRepresentation: signature) else {
                return PostbackVerdict(
                    .invalid, version: version, reason: "signature is not DER ECDSA", signedFields: fields)
            }
            valid = keys.skanP256.isValidSignature(der, for: message)
        }
        return PostbackVerdict(
            valid ? .verified : .invalid, version: version, reason: valid ? nil : "bad signature", signedFields: fields)
    }

    /// A value as it was received: strings as they are, integers in decimal, booleans as
    /// `true`/`false`. Anything else cannot be part of a signed message.
    static func text(_ value: JSONValue?) -> String? {
        switch value {
        case .string(let s): s
        case .integer(let n): String(n)
        case .bool(let b): b ? "true" : "false"
        default: nil
        }
    }

    static func boolValue(_ value: JSONValue?) -> Bool? {
        switch value {
        case .bool(let b): b
        case .string("true"): true
        case .string("false"): false
        case .integer(1): true
        case .integer(0): false
        default: nil
        }
    }
}
