/// An error a client can act on: a stable `code`, a human `message` and, where one is to
/// blame, the `field` (a dotted JSON path such as `Version3.1.iad-campaign-id`).
///
/// Codes are static members rather than enum cases so that adding one is not a breaking
/// change; every code maps to exactly one HTTP status.
public struct GatewayError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A machine-readable error code with its HTTP status.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        public let name: String
        public let httpStatus: Int

        public init(_ name: String, httpStatus: Int) {
            self.name = name
            self.httpStatus = httpStatus
        }

        public var description: String { name }

        /// The body is not JSON.
        public static let malformedJSON = Code("malformed_json", httpStatus: 400)
        /// The request is not HTTP/1.1 the server can read (an unknown method, a broken
        /// header line); answered before any route, and the connection closed.
        public static let malformedHTTP = Code("malformed_http", httpStatus: 400)
        /// A query parameter the route does not take, or whose value it cannot read.
        public static let invalidParameter = Code("invalid_parameter", httpStatus: 400)
        /// A required field is absent.
        public static let missingField = Code("missing_field", httpStatus: 422)
        /// A field is present with the wrong JSON type or an unreadable value.
        public static let invalidField = Code("invalid_field", httpStatus: 422)
        /// The body exceeds `server.max_body_bytes`.
        public static let payloadTooLarge = Code("payload_too_large", httpStatus: 413)
        /// The body arrived too slowly (`server.body_timeout_ms`).
        public static let requestTimeout = Code("request_timeout", httpStatus: 408)
        /// The body's media type is not one the route reads.
        public static let unsupportedMediaType = Code("unsupported_media_type", httpStatus: 415)
        /// No route at this path.
        public static let notFound = Code("not_found", httpStatus: 404)
        /// A route exists at this path, but not for this method.
        public static let methodNotAllowed = Code("method_not_allowed", httpStatus: 405)
        /// Missing or unknown credentials.
        public static let unauthorized = Code("unauthorized", httpStatus: 401)
        /// Credentials valid, but not for this app.
        public static let forbidden = Code("forbidden", httpStatus: 403)
        /// A postback whose signature does not verify, refused by `on_invalid_signature: reject`.
        public static let invalidSignature = Code("invalid_signature", httpStatus: 422)
        /// A caller over its rate limit; the answer carries `Retry-After`.
        public static let rateLimited = Code("rate_limited", httpStatus: 429)
        /// The request contradicts what is stored (a transaction owned by another user).
        public static let conflict = Code("conflict", httpStatus: 409)
        /// The connection closed before the body arrived whole (the client gave up); no
        /// one reads the answer, but the log and the metrics name the client's doing.
        public static let incompleteBody = Code("incomplete_body", httpStatus: 400)
        /// The store could not take the record; nothing was acknowledged.
        public static let storageUnavailable = Code("storage_unavailable", httpStatus: 503)
        /// Anything else; details are logged, not returned.
        public static let internalError = Code("internal_error", httpStatus: 500)
    }

    public let code: Code
    public let message: String
    public let field: String?
    /// What went wrong underneath, for the log only (never the answer): the store's own
    /// error behind a `storage_unavailable`, so that an operator sees a full disk or a
    /// locked file instead of the answer's "unavailable". Not part of equality.
    public var cause: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, field: String? = nil) {
        self.code = code
        self.message = message
        self.field = field
    }

    public static func == (a: GatewayError, b: GatewayError) -> Bool {
        a.code == b.code && a.message == b.message && a.field == b.field
    }

    /// The store failed; nothing was recorded, so the caller should send again.
    public static func storageUnavailable(cause: any Error & Sendable) -> GatewayError {
        var error = GatewayError(.storageUnavailable, "the store is unavailable; nothing was recorded")
        error.cause = cause
        return error
    }

    public var description: String {
        if let field { return "\(code.name): \(field): \(message)" }
        return "\(code.name): \(message)"
    }

    public static func missing(_ field: String) -> GatewayError {
        GatewayError(.missingField, "\(field) is required", field: field)
    }

    public static func invalid(_ field: String, _ message: String) -> GatewayError {
        GatewayError(.invalidField, message, field: field)
    }
}

/// An error as every route writes it, `{"code", "message", "field"}`: `field` is null when
/// no one field is at fault, never left out.
public struct GatewayErrorDetail: Encodable, Equatable, Sendable {
    public let code: String
    public let message: String
    public let field: String?

    public init(_ error: GatewayError) {
        code = error.code.name
        message = error.message
        field = error.field
    }

    private enum Keys: String, CodingKey { case code, message, field }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(code, forKey: .code)
        try container.encode(message, forKey: .message)
        try container.encode(field, forKey: .field)
    }
}
