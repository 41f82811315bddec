import GatewayCore
import Hummingbird

/// Refuses a write a browser makes for another site's page. A page anywhere can post a
/// "simple" request (`text/plain`, no custom header) to a gateway on the developer's own
/// machine, which takes JSON whatever its `Content-Type` says and, without API keys, any
/// caller: a forged purchase would reach every sink. Apps, backends, Apple and vendors send
/// neither `Sec-Fetch-Site` nor `Origin`; the dashboard's own forms are same-origin.
struct CrossSiteRequests<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        if ![.get, .head, .options].contains(request.method),
            Self.isCrossSite(request.headers, authority: request.head.authority)
        {
            throw GatewayError(
                .forbidden, "a browser's request from another site's page is refused (Sec-Fetch-Site or Origin)")
        }
        return try await next(request, context)
    }

    static var fetchSite: HTTPFields.Element.Name { HTTPFields.Element.Name("Sec-Fetch-Site")! }

    static func isCrossSite(_ headers: HTTPFields, authority: String?) -> Bool {
        // Sent by every current browser, and the browser's own word for it.
        if let site = headers[fetchSite] {
            return site == "cross-site" || site == "same-site"
        }
        // Older browsers: an Origin that is not this host.
        guard let origin = headers[.origin] else { return false }
        guard origin != "null", let host = authority else { return true }
        let named = origin.split(separator: "/", omittingEmptySubsequences: true).dropFirst().first
        return named.map { $0.lowercased() != host.lowercased() } ?? true
    }
}
