import GatewayCore
import Hummingbird

/// Refuses a write a browser makes for another site's page. A page anywhere can post a
/// "simple" request (`text/plain`, no custom header) to a gateway on the developer's own
/// machine, which takes JSON whatever its `Content-Type` says and, without API keys, any
/// caller: a forged purchase would reach every sink. Browsers say where a request comes from
/// in `Sec-Fetch-Site`; apps, backends, Apple and vendors send no such header, and the
/// dashboard's own forms are `same-origin`. `Origin` is not compared with the host: behind a
/// proxy that rewrites `Host` the dashboard's own sign-in would look foreign.
struct CrossSiteRequests<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        if ![.get, .head, .options].contains(request.method), Self.isCrossSite(request.headers) {
            throw GatewayError(.forbidden, "a browser's request from another site's page is refused (Sec-Fetch-Site)")
        }
        return try await next(request, context)
    }

    static func isCrossSite(_ headers: HTTPFields) -> Bool {
        let site = headers[HTTPFields.Element.Name("Sec-Fetch-Site")!]
        return site == "cross-site" || site == "same-site"
    }
}
