import AsyncHTTPClient

/// Why an outbound call failed, for logs and dead letters.
public enum OutboundFailure {
    /// Never the error's full text: it can hold the URL (Singular's key is in the query)
    /// or a header value (a key with a stray newline).
    public static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError { return error.shortDescription }
        if let error = error as? BoundedExchange.BodyTimeout { return error.description }
        return String(describing: type(of: error))
    }
}
