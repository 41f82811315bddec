import Crypto
import Foundation

/// The OAuth client secret Apple Ads asks for: a JWT signed ES256 with the team's private
/// key (header `alg`, `kid`; claims `sub` = client id, `iss` = team id, `aud`, `iat`,
/// `exp` less than 180 days later). The same for the Platform API v1 and Campaign
/// Management API v5.
struct AppleAdsClientSecret: Sendable {
    let clientID: String
    let teamID: String
    let keyID: String
    let privateKey: P256.Signing.PrivateKey
    /// How long each secret is valid; Apple allows less than 180 days.
    var lifetime: TimeInterval = 179 * 86_400

    static let audience = "https://appleid.apple.com"

    func make(now: Date) throws -> (jwt: String, expires: Date) {
        let issuedAt = Int(now.timeIntervalSince1970)
        let expires = issuedAt + Int(lifetime)
        let header = try JSONSerialization.data(withJSONObject: ["alg": "ES256", "kid": keyID], options: .sortedKeys)
        let claims = try JSONSerialization.data(
            withJSONObject: ["sub": clientID, "iss": teamID, "aud": Self.audience, "iat": issuedAt, "exp": expires],
            options: .sortedKeys)
        let input = Self.base64URL(header) + "." + Self.base64URL(claims)
        let signature = try privateKey.signature(for: Data(input.utf8))
        return (input + "." + Self.base64URL(signature.rawRepresentation), Date(timeIntervalSince1970: Double(expires)))
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
