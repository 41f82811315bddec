import Hummingbird

extension Router {
    /// A `GET` route that changes nothing, and `HEAD` on it answering the same without the
    /// body: load balancers and uptime checks probe with `HEAD`, and HTTP expects it
    /// wherever `GET` is served. Never for an ingest route, whose `HEAD` would store nothing.
    func getAndHead(_ path: RouterPath, use handler: @escaping @Sendable (Request, Context) async throws -> Response) {
        get(path, use: handler)
        head(path) { request, context in try await handler(request, context).createHeadResponse() }
    }
}
