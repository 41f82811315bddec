import Foundation
import GatewayCore
import Hummingbird

/// A route an enabled provider contributes, with the provider's name for its metrics.
struct MountedContribution: Sendable {
    let provider: String
    let route: ContributedRoute
}

extension GatewayHTTP {
    /// What the enabled providers contribute besides their ingest routes, as they stand:
    /// a disabled provider contributes nothing, so its routes answer `404`.
    static func contributedRoutes(gateway: Gateway) -> [MountedContribution] {
        gateway.runningProviders.withLock { $0 }.flatMap { running in
            running.contributions.map { MountedContribution(provider: running.name, route: $0) }
        }
    }

    /// Mounts each contributed route as its kind says: an ingest route counts its refusals
    /// under its provider, a query answers `HEAD` too. The server's part is what every
    /// route gets: the body's limits, the keys as they stand, the JSON answer.
    static func addContributedRoutes(
        _ contributions: [MountedContribution], to router: Router<GatewayRequestContext>, gateway: Gateway
    ) {
        let bodies = BodyReader(gateway.configuration.server)
        let keyring = gateway.keyring
        for contribution in contributions {
            let route = contribution.route
            let handler: @Sendable (Request, GatewayRequestContext) async throws -> Response = { request, _ in
                let routeRequest = RouteRequest(
                    query: FormEncoding.decode(request.uri.query ?? ""),
                    admit: { scope, queryKey in try keyring.admit(request.headers, scope: scope, queryKey: queryKey) },
                    body: { try await bodies.collect(request) })
                return JSONResponse.make(try await route.handle(routeRequest))
            }
            switch route.kind {
            case .ingest:
                router.post(
                    RouterPath(route.path),
                    use: countingRejections(of: contribution.provider, metrics: gateway.metrics, handler))
            case .query:
                router.getAndHead(RouterPath(route.path), use: handler)
            }
        }
    }
}
