import AsyncHTTPClient
import NIOCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Why an outbound call failed, for logs and dead letters.
public enum OutboundFailure {
    /// Never the error's full text: it can hold the URL (Singular's key is in the query)
    /// or a header value (a key with a stray newline).
    public static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError { return error.shortDescription }
        if let error = error as? BoundedExchange.BodyTimeout { return error.description }
        // The system's reason alone ("Connection refused"): `IOError` told an operator
        // nothing about whether the host refused, reset or could not be reached.
        if let error = error as? IOError { return "IOError: " + String(cString: strerror(error.errnoCode)) }
        return String(describing: type(of: error))
    }
}
