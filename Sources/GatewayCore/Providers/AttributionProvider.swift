import Foundation

/// Reads one kind of attribution signal and turns it into records.
///
/// A provider owns HTTP routes (``routes``); the server hands it the bytes it received on
/// them. `normalize` must be pure: no I/O, no clock but `payload.receivedAt`, so the same
/// payload gives the same record offline (`attribution-gateway normalize`) as online.
/// It throws ``GatewayError`` naming the field for anything it cannot read; it never
/// returns a half-filled record pretending to be data.
public protocol AttributionProvider: Sendable {
    /// The name under `providers:` in config.yaml and in each record's `provider` field.
    var name: String { get }
    /// The routes this provider answers.
    var routes: [ProviderRoute] { get }
    /// Turns one raw payload into one or more records.
    func normalize(_ payload: IngestPayload) throws -> [AttributionRecord]
    /// The app each record of `payload` is for, read from its plain fields without the
    /// costly checks of ``normalize(_:)`` (signatures), so that a caller may be refused
    /// before that work; nil when the provider has no such checks. It throws what
    /// `normalize` would for a payload it cannot read.
    func claimedAppIDs(_ payload: IngestPayload) throws -> [String?]?
}

extension AttributionProvider {
    public func claimedAppIDs(_ payload: IngestPayload) throws -> [String?]? { nil }
}

/// An HTTP route a provider owns.
public struct ProviderRoute: Sendable, Hashable {
    public enum Method: String, Sendable { case get = "GET", post = "POST" }
    public let method: Method
    public let path: String
    /// True for routes apps and backends call, which need an API key when `auth:` has
    /// keys; false for Apple's and vendors' routes, which prove themselves otherwise
    /// (signatures, shared secrets).
    public let requiresAPIKey: Bool
    /// The scope a key needs here: `backend` for routes whose records an app never sends
    /// itself (revenue events, forwarded postbacks), which a key read out of an app must
    /// not reach.
    public let keyScope: APIKeyScope
    /// The status of a stored payload: `202`, or `200` for callers that retry anything
    /// else (Apple's devices resend a postback for nine days until they see a `200`).
    public let acceptedStatus: Int
    /// The SHA-256 of the shared secret a caller must present (a vendor's callbacks), in
    /// `X-Gateway-Secret`, `Authorization` or the `secret` query parameter.
    public let sharedSecretSHA256: [UInt8]?
    /// The largest body this route reads, when smaller than `server.max_body_bytes`: a
    /// route anyone may post to keeps what is posted, so its cap is what one request can
    /// put on the gateway's disk.
    public let maxBodyBytes: Int?

    /// Anyone may post here: the route takes neither an API key nor a shared secret.
    public var isOpen: Bool { !requiresAPIKey && sharedSecretSHA256 == nil }

    public init(
        _ method: Method, _ path: String, requiresAPIKey: Bool = true, keyScope: APIKeyScope = .app,
        acceptedStatus: Int = 202, sharedSecretSHA256: [UInt8]? = nil, maxBodyBytes: Int? = nil
    ) {
        self.method = method
        self.path = path
        self.requiresAPIKey = requiresAPIKey
        self.keyScope = keyScope
        self.acceptedStatus = acceptedStatus
        self.sharedSecretSHA256 = sharedSecretSHA256
        self.maxBodyBytes = maxBodyBytes
    }
}

/// What an API key may call (`auth.api_keys[].scope`). A key inside an app can be read out
/// of it by anyone, so such a key is held to what an app itself sends.
public enum APIKeyScope: String, Sendable, CaseIterable {
    /// What an app sends: iAd, AdServices, the ASA SDK's functions, conversion values.
    case app
    /// Every route of its app, `/v1/events` and forwarded postbacks included.
    case backend

    /// Whether a key of this scope may call a route that needs `required`.
    public func admits(_ required: APIKeyScope) -> Bool { self == .backend || required == .app }
}

/// Raw bytes as received, with what the transport knew about them.
public struct IngestPayload: Sendable {
    public var body: Data
    public var receivedAt: Date
    public var path: String
    /// The query parameters, without the `secret` that authenticated the call.
    public var query: [String: String]
    public var contentType: String?
    /// `receivedAt` is a time the payload was given (an `import` envelope's
    /// `received_at`), not this arrival's: what is keyed by its arrival keeps one key
    /// however often it is imported, where each live arrival is a new one.
    public var hasFixedArrival: Bool

    public init(
        body: Data, receivedAt: Date, path: String = "", query: [String: String] = [:], contentType: String? = nil,
        hasFixedArrival: Bool = false
    ) {
        self.body = body
        self.receivedAt = receivedAt
        self.path = path
        self.query = query
        self.contentType = contentType
        self.hasFixedArrival = hasFixedArrival
    }
}
