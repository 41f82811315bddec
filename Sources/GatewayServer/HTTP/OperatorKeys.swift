import Crypto
import Foundation
import GatewayConfig
import GatewayCore
import HTTPTypes
import Synchronization

/// `auth.operator_keys` on the reports and the dashboard, held as SHA-256 digests. Apart
/// from ``APIKeyring``: an app's key opens no report, an operator's key writes no record.
/// Replaced whole by a reload, between requests.
final class OperatorKeys: Sendable {
    private let held: Mutex<[[UInt8]]>

    init(_ settings: AuthSettings) {
        held = Mutex(settings.operatorKeys)
    }

    var digests: [[UInt8]] { held.withLock { $0 } }

    func replace(with settings: AuthSettings) {
        held.withLock { $0 = settings.operatorKeys }
    }

    var isConfigured: Bool { !digests.isEmpty }

    /// The configured key's digest that `key` is, compared in constant time with every
    /// configured key whatever matched before.
    func matching(_ key: String) -> [UInt8]? {
        let presented = SHA256Hex.digest(key.trimmingWhitespace())
        var found: [UInt8]?
        for digest in self.digests where APIKeyring.constantTimeEqual(digest, presented) { found = digest }
        return found
    }

    /// The key of `Authorization: Bearer KEY` (the scheme in any case), if it is one.
    func bearer(_ headers: HTTPFields) -> [UInt8]? {
        guard let header = headers[.authorization], header.count > 7, header.prefix(7).lowercased() == "bearer "
        else { return nil }
        return matching(String(header.dropFirst(7)))
    }

    /// Admits a request whose bearer token is an operator key; else `403` when none is
    /// configured, `401` when it names none.
    func admit(_ headers: HTTPFields) throws {
        guard isConfigured else { throw Self.notConfigured }
        guard bearer(headers) != nil else { throw Self.unauthorized }
    }

    /// A session for `digest` until `expiry`: the expiry and an HMAC of it keyed with the
    /// key's digest. Opaque, never the key; every replica and every restart reads it alike
    /// (no shared secret to keep); removing the key from the config ends its sessions.
    static func session(for digest: [UInt8], expiry: Int) -> String {
        "\(expiry).\(mac(digest, expiry))"
    }

    /// Whether `cookie` is a session of a configured key that has not expired at `now`.
    func admitsSession(_ cookie: String, now: Date = Date()) -> Bool {
        let parts = cookie.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let expiry = Int(parts[0]), Double(expiry) > now.timeIntervalSince1970,
            Double(expiry) <= now.timeIntervalSince1970 + Double(Self.sessionSeconds)
        else { return false }
        let presented = Array(parts[1].utf8)
        var matched = false
        for digest in digests {
            matched = APIKeyring.constantTimeEqual(Array(Self.mac(digest, expiry).utf8), presented) || matched
        }
        return matched
    }

    static func mac(_ digest: [UInt8], _ expiry: Int) -> String {
        let code = HMAC<SHA256>.authenticationCode(
            for: Data("attribution-gateway dashboard session \(expiry)".utf8), using: SymmetricKey(data: digest))
        return Hex.lowercase(Data(code))
    }

    /// How long a login lasts: a working day, then the form again.
    static let sessionSeconds = 12 * 3600

    static let notConfigured = GatewayError(
        .forbidden, "auth.operator_keys is not set: the reports and the dashboard are closed until it lists a key")

    static let unauthorized = GatewayError(
        .unauthorized, "send an operator key (auth.operator_keys) as Authorization: Bearer KEY")
}
