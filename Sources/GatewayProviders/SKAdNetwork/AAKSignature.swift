import Crypto
import Foundation
import GatewayCore

/// Verifies AdAttributionKit postbacks: the compact JWS in `jws-string` (RFC 7515),
/// ES256 with the raw 64-byte R‖S signature (RFC 7518 §3.4), the key chosen by the
/// decoded header's `kid`. The body's other keys (conversion values, country, interaction
/// type) are outside the JWS and never signed.
enum AAKSignature {
    struct Decoded {
        var verdict: PostbackVerdict
        /// The JWS payload's claims, when they could be read.
        var claims: [String: JSONValue]
    }

    static func verify(_ body: [String: JSONValue], keys: PostbackKeys) -> Decoded {
        func fail(_ outcome: PostbackVerdict.Outcome, _ reason: String, claims: [String: JSONValue] = [:]) -> Decoded {
            Decoded(verdict: PostbackVerdict(outcome, version: "aak", reason: reason), claims: claims)
        }
        guard case .string(let jws)? = body["jws-string"] else { return fail(.invalid, "missing field jws-string") }
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = base64URL(parts[0]), let payloadData = base64URL(parts[1]),
            case .object(let header)? = try? JSONValue.parse(headerData)
        else { return fail(.invalid, "jws-string is not a compact JWS") }
        var claims: [String: JSONValue] = [:]
        if case .object(let object)? = try? JSONValue.parse(payloadData) { claims = object }
        guard header["alg"] == .string("ES256") else { return fail(.unverifiable, "unsupported alg", claims: claims) }
        guard case .string(let kid)? = header["kid"] else { return fail(.unverifiable, "no kid", claims: claims) }
        let key: P256.Signing.PublicKey
        if let any = keys.aakAnyKid {
            key = any
        } else if let production = keys.aakProduction[kid] {
            key = production
        } else if let development = keys.aakDevelopment[kid] {
            guard keys.allowDevelopmentKeys else {
                return fail(.unverifiable, "development key \(kid) not allowed", claims: claims)
            }
            key = development
        } else {
            return fail(.unverifiable, "unknown key \(kid)", claims: claims)
        }
        guard let raw = base64URL(parts[2]) else { return fail(.invalid, "signature is not base64url", claims: claims) }
        guard raw.count == 64, let signature = try? P256.Signing.ECDSASignature(rawRepresentation: raw) else {
            return fail(.invalid, "signature is not a 64-byte R‖S", claims: claims)
        }
        let signingInput = Data("\(parts[0]).\(parts[1])".utf8)
        guard key.isValidSignature(signature, for: signingInput) else {
            return fail(.invalid, "bad signature", claims: claims)
        }
        guard !claims.isEmpty else { return fail(.invalid, "the JWS payload is not a JSON object") }
        return Decoded(
            verdict: PostbackVerdict(.verified, version: "aak", signedFields: claims.keys.sorted()), claims: claims)
    }

    /// The claims of the JWS in `jws-string`, read without checking its signature: only to
    /// refuse a caller early, never as data.
    static func unverifiedClaims(_ body: [String: JSONValue]) -> [String: JSONValue] {
        unverifiedPart(1, of: body)
    }

    /// The JWS header as sent (`alg`, `kid`), unchecked.
    static func unverifiedHeader(_ body: [String: JSONValue]) -> [String: JSONValue] {
        unverifiedPart(0, of: body)
    }

    private static func unverifiedPart(_ index: Int, of body: [String: JSONValue]) -> [String: JSONValue] {
        guard case .string(let jws)? = body["jws-string"] else { return [:] }
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let part = base64URL(parts[index]),
            case .object(let object)? = try? JSONValue.parse(part)
        else { return [:] }
        return object
    }

    static func base64URL(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard base64.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "+" || $0 == "/") }) else {
            return nil
        }
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}
