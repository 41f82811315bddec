import GatewayConfig
import GatewayCore
import HTTPTypes
import Synchronization

/// The API keys of `auth.api_keys`, held as SHA-256 digests. A key writes records only
/// for its own app; answers to a bad key say nothing about which keys exist.
///
/// One per gateway, shared by every route, so that `SIGHUP` can replace the keys while it
/// serves (rotation without a restart).
final class APIKeyring: Sendable {
    private let current: Mutex<[AuthSettings.Key]>

    init(keys: [AuthSettings.Key]) {
        current = Mutex(keys)
    }

    var keys: [AuthSettings.Key] { current.withLock { $0 } }

    /// Takes effect for the requests that look after it returns.
    func replace(with keys: [AuthSettings.Key]) {
        current.withLock { $0 = keys }
    }

    /// The apps the key a request presents may write for on a route that needs `scope`,
    /// from one reading of the keys (a reload in between cannot split the answer): nil when
    /// there are no keys, so the routes are open; `401` when there are and the request names
    /// none of them; `403` when the keys it names are app keys and the route a backend's.
    /// `queryKey` is a key sent as the query's `a`: the client snippet of Singular's SKAN S2S
    /// guide sends its key so, and cannot set a header.
    func admit(_ headers: HTTPFields, scope: APIKeyScope = .app, queryKey: String? = nil) throws -> Set<String>? {
        let keys = keys
        guard !keys.isEmpty else { return nil }
        // Both headers may hold a key (the SDK's `apikey` beside a backend's bearer): the
        // request may write for the apps of each, as a client holding both keys could anyway.
        var digests = Self.presentedDigests(headers)
        if let key = queryKey?.trimmingWhitespace(), !key.isEmpty { digests.append(SHA256Hex.digest(key)) }
        let presented = Self.matching(digests, in: keys)
        guard !presented.isEmpty else { throw Self.unauthorized }
        let apps = presented.filter { $0.scope.admits(scope) }.reduce(into: Set<String>()) { $0.formUnion($1.apps) }
        guard !apps.isEmpty else { throw Self.needsBackendKey }
        return apps
    }

    /// The first configured key a request presents, as its digest, apps and scope.
    func presentedKey(_ headers: HTTPFields) -> (digest: [UInt8], apps: Set<String>, scope: APIKeyScope)? {
        Self.presentedKeys(headers, in: keys).first
    }

    /// Each configured key a request presents, in the order of ``presentedDigests(_:)``, as
    /// its digest, apps and scope (one per key: the config refuses a key listed with two).
    /// A Supabase client sends its user's session as `Authorization: Bearer JWT` and the
    /// project's key as `apikey`, so a bearer token naming no key is passed over.
    static func presentedKeys(_ headers: HTTPFields, in keys: [AuthSettings.Key]) -> [(
        digest: [UInt8], apps: Set<String>, scope: APIKeyScope
    )] {
        matching(presentedDigests(headers), in: keys)
    }

    /// The configured keys among `digests`, in their order.
    static func matching(_ digests: [[UInt8]], in keys: [AuthSettings.Key]) -> [(
        digest: [UInt8], apps: Set<String>, scope: APIKeyScope
    )] {
        digests.compactMap { digest in
            var apps: Set<String> = []
            var scope = APIKeyScope.backend
            // Every key is compared, in constant time, whatever matched before.
            for key in keys where constantTimeEqual(key.sha256, digest) {
                apps.insert(key.appID)
                if key.scope == .app { scope = .app }
            }
            return apps.isEmpty ? nil : (digest, apps, scope)
        }
    }

    /// The SHA-256 of each key a request presents, as keys are held: from `Authorization:
    /// Bearer KEY` (the scheme in any case), then from `apikey: KEY`, the header of
    /// Supabase's functions that the ASA Attribution SDK sends; each key trimmed.
    static func presentedDigests(_ headers: HTTPFields) -> [[UInt8]] {
        var digests: [[UInt8]] = []
        if let header = headers[.authorization], header.count > 7, header.prefix(7).lowercased() == "bearer " {
            digests.append(SHA256Hex.digest(header.dropFirst(7).trimmingWhitespace()))
        }
        if let key = headers[apiKeyHeader]?.trimmingWhitespace(), !key.isEmpty { digests.append(SHA256Hex.digest(key)) }
        return digests
    }

    static let apiKeyHeader = HTTPField.Name("apikey")!

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }

    static let unauthorized = GatewayError(
        .unauthorized, "send a valid API key as Authorization: Bearer KEY (or apikey: KEY)")

    static let needsBackendKey = GatewayError(
        .forbidden,
        "this route needs a backend API key (scope: backend); an app's key, which anyone can read out of the app, "
            + "may call only the routes an app calls")

    static let forbidden = GatewayError.keyNotForApp
}
