import GatewayConfig
import GatewayCore
import Hummingbird

/// The shared secret of a vendor's callbacks. Vendors differ in what they let an
/// operator configure: AppsFlyer can add a header, Adjust and Singular only a URL, so
/// the secret may come as `X-Gateway-Secret`, as `Authorization` (bare or `Bearer`), or
/// as the `secret` query parameter. Only its SHA-256 is kept and compared.
enum SharedSecret {
    static let header = HTTPFields.Element.Name("X-Gateway-Secret")!

    static func matches(_ request: Request, sha256 expected: [UInt8]) -> Bool {
        var candidates: [String] = []
        if let value = request.headers[header] { candidates.append(value) }
        if let value = request.headers[.authorization] {
            candidates.append(value)
            if value.count > 7, value.prefix(7).lowercased() == "bearer " {
                candidates.append(String(value.dropFirst(7)))
            }
        }
        if let value = request.uri.queryParameters["secret"] { candidates.append(String(value)) }
        // Every candidate is compared, so timing says nothing about which one matched.
        var matched = false
        for candidate in candidates {
            matched = APIKeyring.constantTimeEqual(SHA256Hex.digest(candidate), expected) || matched
        }
        return matched
    }

    static let unauthorized = GatewayError(
        .unauthorized, "send the callback secret as X-Gateway-Secret, Authorization or the secret query parameter")
}
