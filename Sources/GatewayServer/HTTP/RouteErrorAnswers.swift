import GatewayCore
import Hummingbird

/// The error answers of the contributed routes that answer errors in a shape of their
/// own (``ContributedRoute/errorAnswer``), by path; every other path's are
/// `{"error": …}`. Read by every middleware that answers an error.
struct RouteErrorAnswers: Sendable {
    private let byPath: [String: @Sendable (GatewayError) -> RouteAnswer]

    init(_ contributions: [MountedContribution] = []) {
        var byPath: [String: @Sendable (GatewayError) -> RouteAnswer] = [:]
        for contribution in contributions {
            guard let answer = contribution.route.errorAnswer else { continue }
            byPath[RateLimitMiddleware.OpenRoutes.trimmed(contribution.route.path)] = answer
        }
        self.byPath = byPath
    }

    /// The answer to `error` on the request's path.
    func response(to error: GatewayError, for request: Request, context: some RequestContext) throws -> Response {
        // The router serves a path with and without a trailing slash alike.
        if let answer = byPath[RateLimitMiddleware.OpenRoutes.trimmed(request.uri.path)] {
            return JSONResponse.make(answer(error))
        }
        return try error.response(from: request, context: context)
    }

}
