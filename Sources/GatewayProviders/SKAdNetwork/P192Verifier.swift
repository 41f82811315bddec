import COpenSSL
import Foundation

/// ECDSA-SHA256 on P-192 through the system OpenSSL: swift-crypto leaves that curve out
/// on purpose, and SKAdNetwork 1.0 and 2.0 postbacks are signed with it.
enum P192Verifier {
    /// True when `der` is a SubjectPublicKeyInfo for an EC key on P-192.
    static func isValidKey(_ der: Data) -> Bool {
        withKey(der) { key in EVP_PKEY_get_bits(key) == 192 } ?? false
    }

    /// Verifies a DER ECDSA signature over SHA-256 of `message`.
    static func verify(signature: Data, message: Data, spki: Data) -> Bool {
        withKey(spki) { key -> Bool in
            guard EVP_PKEY_get_bits(key) == 192, let context = EVP_MD_CTX_new() else { return false }
            defer { EVP_MD_CTX_free(context) }
            guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
            let result = signature.withUnsafeBytes { sig in
                message.withUnsafeBytes { msg in
                    EVP_DigestVerify(
                        context, sig.bindMemory(to: UInt8.self).baseAddress, sig.count,
                        msg.bindMemory(to: UInt8.self).baseAddress, msg.count)
                }
            }
            return result == 1
        } ?? false
    }

    private static func withKey<T>(_ der: Data, _ body: (OpaquePointer) -> T) -> T? {
        // Failures leave entries in OpenSSL's per-thread error queue; nobody reads them.
        defer { ERR_clear_error() }
        return der.withUnsafeBytes { raw -> T? in
            guard let base = raw.bindMemory(to: UInt8.self).baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            guard let key = d2i_PUBKEY(nil, &cursor, raw.count) else { return nil }
            defer { EVP_PKEY_free(key) }
            return body(key)
        }
    }
}
