import Foundation

/// An HTTP route a provider serves beside its ingest routes (``AttributionProvider/routes``),
/// contributed through its plugin (``ProviderPlugin/routes(options:context:)``): the ASA
/// SDK's functions, the conversion-value query. The server mounts what the enabled
/// providers contribute without knowing any of them; it checks no key for them (a handler
/// asks ``RouteRequest/admit(scope:queryKey:)``) and answers a thrown ``GatewayError`` as
/// it answers every route's.
///
/// Declared without the HTTP server's types, so that a provider depends on the core alone.
public struct ContributedRoute: Sendable {
    public enum Kind: Sendable {
        /// Writes records (`POST`): each refusal is counted in
        /// `gateway_records_rejected_total` under the provider, as its ingest routes' are.
        case ingest
        /// Changes nothing (`GET`): answers `HEAD` alike, as load balancers and uptime
        /// checks probe with it; a refusal rejects no record.
        case query
    }

    public let kind: Kind
    public let path: String
    /// This route's error answers in place of `{"error": …}`, for clients that read
    /// another shape; applied to every error on the path, a rate limit's included.
    public let errorAnswer: (@Sendable (GatewayError) -> RouteAnswer)?
    public let handle: @Sendable (RouteRequest) async throws -> RouteAnswer

    public init(
        _ kind: Kind, _ path: String, errorAnswer: (@Sendable (GatewayError) -> RouteAnswer)? = nil,
        handle: @escaping @Sendable (RouteRequest) async throws -> RouteAnswer
    ) {
        self.kind = kind
        self.path = path
        self.errorAnswer = errorAnswer
        self.handle = handle
    }
}

/// A contributed route's answer: a status and a JSON body.
public struct RouteAnswer: Sendable {
    public let status: Int
    public let json: Data

    /// `value` as every JSON answer of the gateway is written: sorted keys, `/` unescaped.
    public init(status: Int, _ value: some Encodable) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        self.status = status
        json = (try? encoder.encode(value)) ?? Data("{}".utf8)
    }
}
