import AsyncHTTPClient
import Foundation

/// The HTTP client of every outbound call: the sinks that deliver to a destination
/// (webhooks, Mixpanel, the S2S vendors), AdServices and Apple Ads' token endpoint and
/// API (a `307` would carry the OAuth client secret elsewhere): AsyncHTTPClient's
/// defaults without redirects. `HTTPClient.shared`
/// follows up to 20; each would send the request again to wherever the answer points:
/// the body (a `307`/`308` keeps it: signed records, Mixpanel's token in `/engage`
/// updates) and every header but `Authorization` and cookies (a webhook's signature, an
/// operator's own headers, AppsFlyer's `authentication`). And a `2xx` from elsewhere is
/// not the destination's acceptance. A `3xx` comes back as the answer, for the sink to
/// classify (see ``RedirectAnswer``).
///
/// Its pool keeps up to 1,024 connections per host, not AsyncHTTPClient's 8: each sink's
/// `concurrency` (up to 256 for a vendor, and vendors behind one proxy share a host) must
/// not queue for a connection, since a request's deadline runs while it waits, and a
/// vendor's event that waited most of its timeout and then went out would be dead-lettered
/// ("may have counted it") though the vendor answered in time.
public enum NoRedirectHTTPClient {
    public static let shared: HTTPClient = {
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow)
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 1024)
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()
}

/// A `3xx` that ``NoRedirectHTTPClient`` did not follow.
public enum RedirectAnswer {
    public static func contains(_ status: Int) -> Bool {
        (300..<400).contains(status)
    }

    /// `302 (a redirect to https://example.com, not followed)`: where the answer points
    /// as scheme, host and port only, since its path and query can hold a token.
    public static func describe(status: Int, location: String?) -> String {
        guard let location, !location.isEmpty else { return "\(status) (a redirect, not followed)" }
        guard let url = URL(string: location), let scheme = url.scheme, let host = url.host, !host.isEmpty else {
            return "\(status) (a redirect on the same host, not followed)"
        }
        let shownHost = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return "\(status) (a redirect to \(scheme)://\(shownHost)\(url.port.map { ":\($0)" } ?? ""), not followed)"
    }
}
