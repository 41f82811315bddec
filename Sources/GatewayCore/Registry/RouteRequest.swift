import Foundation
import Logging

/// A request on a ``ContributedRoute``, as the server hands it over: what a handler may
/// read of it, and the server's checks it may ask for.
public struct RouteRequest: Sendable {
    /// The query's parameters, decoded as a form is (`+` a space).
    public let query: [String: String]
    private let admitKey: @Sendable (APIKeyScope, String?) throws -> Set<String>?
    private let readBody: @Sendable () async throws -> Data

    public init(
        query: [String: String], admit: @escaping @Sendable (APIKeyScope, String?) throws -> Set<String>?,
        body: @escaping @Sendable () async throws -> Data
    ) {
        self.query = query
        admitKey = admit
        readBody = body
    }

    /// The apps the request's API key may write for on a route that needs `scope`, by
    /// `auth.api_keys` as they stand: nil when there are none (the routes are open). Throws
    /// `401` for a request naming no key, `403` for an app's key on a backend's route.
    /// `queryKey` is a key the client could send only in the query.
    public func admit(scope: APIKeyScope = .app, queryKey: String? = nil) throws -> Set<String>? {
        try admitKey(scope, queryKey)
    }

    /// The body, read within `server.max_body_bytes` and `server.body_timeout_ms`
    /// (`413`, `408`); once.
    public func body() async throws -> Data {
        try await readBody()
    }
}

/// What a provider's contributed routes may use of the running gateway.
public struct ProviderRouteContext: Sendable {
    public let pipeline: IngestPipeline
    /// The provider's own resolver, when it is a ``DeferredAttributionProvider``.
    public let resolver: PendingResolver?
    public let logger: Logger

    public init(pipeline: IngestPipeline, resolver: PendingResolver?, logger: Logger) {
        self.pipeline = pipeline
        self.resolver = resolver
        self.logger = logger
    }
}

extension GatewayError {
    /// A key's apps do not include the app a request writes for.
    public static let keyNotForApp = GatewayError(
        .forbidden, "this API key may not write records for this app_id", field: "app_id")
}
