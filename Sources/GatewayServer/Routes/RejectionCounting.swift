import GatewayCore
import Hummingbird

extension GatewayHTTP {
    /// A provider's route handler whose every error answer is counted in
    /// `gateway_records_rejected_total{provider, code}`: the payload's own faults and the
    /// route's (a missing or wrong API key, a body too large or too slow, the store
    /// unavailable) alike, so that one alert on that counter sees them all.
    static func countingRejections(
        of provider: String, metrics: GatewayMetrics,
        _ handler: @escaping @Sendable (Request, GatewayRequestContext) async throws -> Response
    ) -> @Sendable (Request, GatewayRequestContext) async throws -> Response {
        { request, context in
            do {
                return try await handler(request, context)
            } catch {
                // Counted under the code ErrorMiddleware answers it with.
                metrics.rejected(
                    provider: provider,
                    code: ErrorMiddleware<GatewayRequestContext>.answer(to: error, for: request).code.name)
                throw error
            }
        }
    }
}
