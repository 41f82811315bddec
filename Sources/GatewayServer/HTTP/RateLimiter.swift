import Foundation
import GatewayConfig
import GatewayCore
import Hummingbird
import Synchronization

/// Token buckets by caller: each caller may send `rate` requests a second on average
/// and `burst` at once. Callers are API keys (by digest, never the key) and client IPs.
final class RateLimiter: Sendable {
    struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    let rate: Double
    let burst: Double
    private let buckets = Mutex<[String: Bucket]>([:])

    init(rate: Double, burst: Double) {
        self.rate = rate
        self.burst = burst
    }

    /// Nil when `caller` may go on; otherwise how long until it may.
    func wait(for caller: String, now: ContinuousClock.Instant = .now) -> Duration? {
        buckets.withLock { buckets in
            // Idle callers' buckets are full again: forgetting them loses nothing.
            if buckets.count > 100_000 {
                buckets = buckets.filter { now - $0.value.updated < .seconds(burst / rate) }
            }
            var bucket = buckets[caller] ?? Bucket(tokens: burst, updated: now)
            bucket.tokens = min(burst, bucket.tokens + (now - bucket.updated) / .seconds(1) * rate)
            bucket.updated = now
            defer { buckets[caller] = bucket }
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                return nil
            }
            return .milliseconds(Int64(((1 - bucket.tokens) / rate * 1000).rounded(.up)))
        }
    }
}

/// Answers `429 rate_limited` with `Retry-After` to callers over their limit, per API key
/// and per client IP, before anything is read or stored. Operator routes are not limited.
struct RateLimitMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext
    let perKey: RateLimiter?
    let perIP: RateLimiter?

    static let exempt: Set<String> = ["/healthz", "/readyz", "/metrics"]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard !Self.exempt.contains(request.uri.path) else { return try await next(request, context) }
        var wait: Duration?
        if let perIP, let address = context.remoteAddress?.ipAddress {
            wait = perIP.wait(for: "ip:" + address)
        }
        if wait == nil, let perKey, let authorization = request.headers[.authorization] {
            let digest = Hex.lowercase(SHA256Hex.digest(authorization).prefix(16))
            wait = perKey.wait(for: "key:" + digest)
        }
        guard let wait else { return try await next(request, context) }
        let seconds = max(1, Int((wait / .seconds(1)).rounded(.up)))
        var response = try GatewayError(.rateLimited, "too many requests; retry after \(seconds) s")
            .response(from: request, context: context)
        response.headers[.retryAfter] = String(seconds)
        return response
    }
}
