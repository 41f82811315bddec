import GatewayConfig
import GatewayCore
import Hummingbird

/// Wrong operator keys by client address: a client may send ten wrong, then one a
/// minute. While it waits, every try is refused before its key is looked at, a right one
/// too, so that waiting out the answers gains a guesser nothing. A right key costs nothing,
/// and neither does a browser's session cookie.
///
/// The dashboard's form and the bearer key of the report routes count alike. Clients are
/// named as the rate limits name them (behind `server.trusted_proxies`, by
/// `X-Forwarded-For`; IPv6 by its /64).
final class OperatorKeyGuesses: Sendable {
    private let wrong: RateLimiter
    private let trusted: [IPNetwork]

    init(trusted: [IPNetwork], allowed: Double = 10, perMinute: Double = 1) {
        self.trusted = trusted
        wrong = RateLimiter(rate: perMinute / 60, burst: allowed)
    }

    /// How a refusal is shown.
    enum Shown {
        case json
        /// The login form, returning to `next` once signed in.
        case loginForm(next: String?)
    }

    /// `429` with `Retry-After` for a client still waiting; nil when it may try.
    func refusal(_ request: Request, context: GatewayRequestContext, as shown: Shown = .json) throws -> Response? {
        guard let client = client(request, context), let wait = wrong.waiting(for: client) else { return nil }
        let seconds = RateLimitMiddleware.retryAfter(wait)
        var response: Response
        if case .loginForm(let next) = shown {
            response = Dashboard.html(
                .tooManyRequests,
                DashboardPage.login(next: next, error: DashboardPage.tooManyWrongKeys(seconds: seconds)))
        } else {
            response = try GatewayError(.rateLimited, "too many wrong operator keys; retry after \(seconds) s")
                .response(from: request, context: context)
        }
        response.headers[.retryAfter] = String(seconds)
        return response
    }

    /// Admits a request whose bearer key is an operator key, as ``OperatorKeys/admit(_:)``
    /// does, counting a wrong one; returns the refusal of a client still waiting.
    func admit(_ request: Request, context: GatewayRequestContext, _ operators: OperatorKeys) throws -> Response? {
        guard operators.isConfigured else { throw OperatorKeys.notConfigured }
        if let refused = try refusal(request, context: context) { return refused }
        do {
            try operators.admit(request.headers)
        } catch {
            if request.headers[.authorization] != nil { failed(request, context: context) }
            throw error
        }
        return nil
    }

    /// Counts a wrong key against the request's client.
    func failed(_ request: Request, context: GatewayRequestContext) {
        if let client = client(request, context) { _ = wrong.wait(for: client) }
    }

    private func client(_ request: Request, _ context: GatewayRequestContext) -> String? {
        RateLimitMiddleware.client(request, context, trusted: trusted)
    }
}
