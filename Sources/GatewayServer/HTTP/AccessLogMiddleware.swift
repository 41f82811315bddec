import Hummingbird

/// Logs one line per answered request, with the request id, so that a caller's
/// `X-Request-Id` can be found in the log whatever the answer. The path only: a query
/// can carry a vendor's shared secret.
struct AccessLogMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        let elapsed = ContinuousClock.now - start
        context.logger.info(
            "request",
            metadata: [
                "method": "\(request.method)", "path": "\(request.uri.path.prefix(256))",
                "status": "\(response.status.code)",
                "duration_ms": "\((elapsed / .microseconds(1)).rounded() / 1000)",
            ])
        return response
    }
}
