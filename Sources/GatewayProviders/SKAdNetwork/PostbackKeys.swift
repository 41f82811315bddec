import Crypto
import Foundation

/// Apple's public keys for postback signatures, as base64 DER SubjectPublicKeyInfo.
/// Config can replace any of them (tests sign with their own keys).
public struct PostbackKeys: Sendable {
    /// SKAdNetwork 1.0 and 2.0 (P-192).
    public var skanP192: Data
    /// SKAdNetwork 2.1 and later (P-256).
    public var skanP256: P256.Signing.PublicKey
    /// AdAttributionKit keys by JWS `kid`.
    public var aakProduction: [String: P256.Signing.PublicKey]
    /// Development keys: accepted only when `allowDevelopmentKeys` is on.
    public var aakDevelopment: [String: P256.Signing.PublicKey]
    public var allowDevelopmentKeys = false
    /// When set, verifies AdAttributionKit postbacks whatever their `kid` (`verify-postback --key`).
    public var aakAnyKid: P256.Signing.PublicKey?

    static let appleP192 =
        "MEkwEwYHKoZIzj0CAQYIKoZIzj0DAQEDMgAEMyHD625uvsmGq4C43cQ9BnfN2xslVT5V1nOmAMP6qaRRUll3PB1JYmgSm+62sosG"
    static let appleP256 =
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEWdp8GPcGqmhgzEFj9Z2nSpQVddayaPe4FMzqM9wib1+aHaaIzoHoLN9zW4K8y4SPykE3YVK3sVqW6Af0lfx3gg=="
    static let appleDevelopment0 =
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAELeEDzpJEP+/qRSE5hJVC1p1J0ssUnQGMzBBbvnACBok8OVGGLgxL0myrKiy6lvRtSlLRsWit87i+vftD8AEqeQ=="
    static let appleDevelopment1 =
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE8YzdO7eM97s/IJ25kdW5CZ3A14USE5IJ5Ha/vhWaxI6UBI1ZxCEvjrKxVluVGe6qWwF1BDFq+QHqKfH5u+wxHQ=="

    /// Apple's published keys.
    public static let apple: PostbackKeys = {
        let p256 = try! p256Key(appleP256)
        return PostbackKeys(
            skanP192: Data(base64Encoded: appleP192)!, skanP256: p256,
            aakProduction: ["apple-cas-identifier/0": p256],
            aakDevelopment: [
                "apple-development-identifier/0": try! p256Key(appleDevelopment0),
                "apple-development-identifier/1": try! p256Key(appleDevelopment1),
            ])
    }()

    struct BadKey: Error, CustomStringConvertible {
        let description: String
    }

    /// A P-256 key from base64 DER SPKI.
    public static func p256Key(_ base64: String) throws -> P256.Signing.PublicKey {
        guard let der = Data(base64Encoded: base64.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw BadKey(description: "not base64")
        }
        do {
            return try P256.Signing.PublicKey(derRepresentation: der)
        } catch {
            throw BadKey(description: "not a P-256 SubjectPublicKeyInfo")
        }
    }

    /// A P-192 key from base64 DER SPKI, checked by parsing it with OpenSSL.
    public static func p192Key(_ base64: String) throws -> Data {
        guard let der = Data(base64Encoded: base64.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw BadKey(description: "not base64")
        }
        guard P192Verifier.isValidKey(der) else { throw BadKey(description: "not a P-192 SubjectPublicKeyInfo") }
        return der
    }
}
