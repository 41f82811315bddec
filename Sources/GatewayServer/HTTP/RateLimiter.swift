import Foundation
import GatewayConfig
import GatewayCore
import Hummingbird
import NIOCore
import Synchronization

/// Token buckets by caller: each caller may send `rate` requests a second on average
/// and `burst` at once. Callers are API keys (by digest, never the key) and client IPs.
final class RateLimiter: Sendable {
    struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    struct Buckets {
        var byCaller: [String: Bucket] = [:]
        var sweepAt: Int
    }

    let rate: Double
    let burst: Double
    private let buckets: Mutex<Buckets>

    init(rate: Double, burst: Double, sweepAt: Int = 100_000) {
        self.rate = rate
        self.burst = burst
        buckets = Mutex(Buckets(sweepAt: sweepAt))
    }

    /// How many callers have a bucket.
    var callers: Int { buckets.withLock { $0.byCaller.count } }

    /// How long until `caller` may go on, nil when it may now; takes nothing from its bucket.
    func waiting(for caller: String, now: ContinuousClock.Instant = .now) -> Duration? {
        buckets.withLock { state in
            guard let bucket = state.byCaller[caller] else { return nil }
            let tokens = refilled(bucket, now: now)
            return tokens >= 1 ? nil : delay(tokens)
        }
    }

    /// A bucket's tokens at `now`: what it held, plus `rate` a second since, up to `burst`.
    private func refilled(_ bucket: Bucket, now: ContinuousClock.Instant) -> Double {
        min(burst, bucket.tokens + (now - bucket.updated) / .seconds(1) * rate)
    }

    /// How long until a bucket holding `tokens` (fewer than one) holds one.
    private func delay(_ tokens: Double) -> Duration {
        .milliseconds(Int64(((1 - tokens) / rate * 1000).rounded(.up)))
    }

    /// Nil when `caller` may go on; otherwise how long until it may.
    func wait(for caller: String, now: ContinuousClock.Instant = .now) -> Duration? {
        buckets.withLock { state in
            // Idle callers' buckets are full again: forgetting them loses nothing. The
            // next sweep waits until the map has doubled, so that a flood of new callers
            // costs each request a share of one sweep, not a sweep each.
            if state.byCaller.count >= state.sweepAt {
                state.byCaller = state.byCaller.filter { now - $0.value.updated < .seconds(burst / rate) }
                state.sweepAt = max(state.sweepAt, state.byCaller.count * 2)
            }
            var bucket = state.byCaller[caller] ?? Bucket(tokens: burst, updated: now)
            bucket.tokens = refilled(bucket, now: now)
            bucket.updated = now
            defer { state.byCaller[caller] = bucket }
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                return nil
            }
            return delay(bucket.tokens)
        }
    }
}

/// The buckets of `server.rate_limits` as they stand: the configuration's at the start,
/// then each reload's, swapped between requests as ``APIKeyring`` swaps keys. A limit a
/// reload left as it was keeps its buckets, so a reload gives nobody a fresh burst.
final class LiveRateLimits: Sendable {
    struct Limiters: Sendable {
        var perKey: RateLimiter?
        var perIP: RateLimiter?
        var openRoutesPerIP: RateLimiter?
    }

    private let current: Mutex<Limiters>

    init(_ limits: RateLimits) {
        current = Mutex(Limiters())
        replace(with: limits)
    }

    /// One reading, so that a reload in between cannot mix two configurations' limits.
    var limiters: Limiters { current.withLock { $0 } }

    /// Takes effect for the requests that look after it returns.
    func replace(with limits: RateLimits) {
        current.withLock { limiters in
            limiters.perKey = Self.kept(limiters.perKey, limits.perKey)
            limiters.perIP = Self.kept(limiters.perIP, limits.perIP)
            limiters.openRoutesPerIP = Self.kept(limiters.openRoutesPerIP, limits.openRoutesPerIP)
        }
    }

    static func kept(_ limiter: RateLimiter?, _ limit: RateLimits.Limit?) -> RateLimiter? {
        guard let limit else { return nil }
        if let limiter, limiter.rate == limit.rate, limiter.burst == limit.burst { return limiter }
        return RateLimiter(rate: limit.rate, burst: limit.burst)
    }
}

/// Answers `429 rate_limited` with `Retry-After` to callers over their limit, per API key
/// and per client IP, before anything is read or stored. Operator routes are not limited.
///
/// Only configured keys get a bucket, one per key however its header is spelled: a
/// header naming no key is answered `401` anyway, and is left to the per-IP limit, so
/// that made-up keys can neither fill the map nor each get a fresh bucket. IPv6 callers
/// are limited by their /64, the block one host is given. Behind `server.trusted_proxies`
/// the client is read from `X-Forwarded-For` (see `ClientAddress`).
///
/// The open routes (Apple's postback copies, which take neither key nor secret) have a
/// per-IP bucket of their own, on by default: a postback that does not verify is still
/// kept, so without it one client could make the store keep thousands a second.
struct RateLimitMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext

    /// The open routes' paths, without a trailing slash (the router serves them either
    /// way).
    struct OpenRoutes {
        let paths: Set<String>

        init(paths: Set<String>) {
            self.paths = Set(paths.map(Self.trimmed))
        }

        func contains(_ path: String) -> Bool { paths.contains(Self.trimmed(path)) }

        static func trimmed(_ path: String) -> String {
            path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        }
    }

    let limits: LiveRateLimits
    var openRoutes: OpenRoutes
    let keyring: APIKeyring
    var trustedProxies: [IPNetwork] = []
    var metrics: GatewayMetrics
    /// A refusal is answered in the shape of the route it refuses.
    var errorAnswers = RouteErrorAnswers()

    static let exempt: Set<String> = ["/healthz", "/readyz", "/metrics", "/openapi.yaml"]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard !Self.exempt.contains(request.uri.path) else { return try await next(request, context) }
        let limiters = limits.limiters
        let perIP = limiters.perIP
        var wait: Duration?
        var limit = "per_ip"
        let open = openRoutes.contains(request.uri.path) ? limiters.openRoutesPerIP : nil
        if perIP != nil || open != nil, let client = Self.client(request, context, trusted: trustedProxies) {
            if let open {
                wait = open.wait(for: client)
                limit = "open_routes_per_ip"
            }
            if wait == nil, let perIP {
                wait = perIP.wait(for: client)
                limit = "per_ip"
            }
        }
        if wait == nil, let perKey = limiters.perKey, let caller = Self.keyCaller(request.headers, keyring: keyring) {
            wait = perKey.wait(for: caller)
            limit = "per_key"
        }
        guard let wait else { return try await next(request, context) }
        metrics.rateLimited(limit: limit)
        let seconds = Self.retryAfter(wait)
        var response = try errorAnswers.response(
            to: GatewayError(.rateLimited, "too many requests; retry after \(seconds) s"), for: request,
            context: context)
        response.headers[.retryAfter] = String(seconds)
        return response
    }

    /// The per-key bucket's name for a request: from the digest of the configured key it
    /// presents (never the key), nil when it presents none, or an app's key (`scope: app`):
    /// anyone can read such a key out of the app, and by spending its one bucket, while
    /// under the per-IP limit, get the app's real installs refused.
    static func keyCaller(_ headers: HTTPFields, keyring: APIKeyring) -> String? {
        guard let key = keyring.presentedKey(headers), key.scope == .backend else { return nil }
        return "key:" + Hex.lowercase(key.digest.prefix(16))
    }

    /// The per-IP bucket's name of the request's client (behind `trusted` proxies, read from
    /// `X-Forwarded-For`); nil without a peer address.
    static func client(_ request: Request, _ context: Context, trusted: [IPNetwork]) -> String? {
        ClientAddress.peer(context.remoteAddress).map { peer in
            ipCaller(ClientAddress.resolve(peer: peer, headers: request.headers, trusted: trusted))
        }
    }

    /// `Retry-After`'s whole seconds for `wait`, at least one.
    static func retryAfter(_ wait: Duration) -> Int {
        max(1, Int((wait / .seconds(1)).rounded(.up)))
    }

    /// The per-IP bucket's name: the address, or for IPv6 its first 64 bits. An IPv4
    /// client of a dual-stack listener arrives as `::ffff:a.b.c.d`, whose first 64 bits
    /// are zero for everyone: it is named by its IPv4 address.
    static func ipCaller(_ address: IPAddress) -> String {
        let bytes = address.bytes
        if address.isIPv4 { return "ip:" + bytes[12...].map(String.init).joined(separator: ".") }
        return "ip6:" + Hex.lowercase(bytes.prefix(8))
    }
}
