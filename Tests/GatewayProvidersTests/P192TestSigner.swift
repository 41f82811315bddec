import COpenSSL
import Foundation

/// A P-192 key pair made with the system OpenSSL, to sign SKAdNetwork 1.0 and 2.0
/// postbacks in tests as Apple does (swift-crypto has no P-192).
final class P192TestSigner {
    private let key: OpaquePointer

    init?() {
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nil) else { return nil }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1,
            EVP_PKEY_CTX_set_ec_paramgen_curve_nid(context, NID_X9_62_prime192v1) == 1,
            EVP_PKEY_keygen(context, &key) == 1, let key
        else { return nil }
        self.key = key
    }

    deinit { EVP_PKEY_free(key) }

    /// The public key as base64 DER SubjectPublicKeyInfo, as config takes it.
    var publicKeyBase64: String {
        var buffer: UnsafeMutablePointer<UInt8>?
        let length = i2d_PUBKEY(key, &buffer)
        guard length > 0, let buffer else { return "" }
        defer { CRYPTO_free(buffer, #file, #line) }
        return Data(bytes: buffer, count: Int(length)).base64EncodedString()
    }

    /// A DER ECDSA signature over SHA-256 of `message`.
    func sign(_ message: String) -> Data? {
        guard let context = EVP_MD_CTX_new() else { return nil }
        defer { EVP_MD_CTX_free(context) }
        let bytes = Array(message.utf8)
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1 else { return nil }
        var length = 0
        guard EVP_DigestSign(context, nil, &length, bytes, bytes.count) == 1 else { return nil }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &signature, &length, bytes, bytes.count) == 1 else { return nil }
        return Data(signature.prefix(length))
    }
}
