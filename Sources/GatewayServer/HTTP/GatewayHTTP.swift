import GatewayConfig
import GatewayCore
import Hummingbird
import Logging
import ServiceLifecycle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The gateway's HTTP surface on Hummingbird.
public enum GatewayHTTP {
    /// `server.max_connections`, else the descriptor limit less what the rest of the
    /// gateway needs, at most 10,000.
    static func connectionLimit(_ settings: ServerSettings) -> Int {
        if let configured = settings.maxConnections { return configured }
        var limit = rlimit()
        #if canImport(Glibc)
            let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
            let resource = RLIMIT_NOFILE
        #endif
        guard getrlimit(resource, &limit) == 0 else { return 1_000 }
        return Int(max(64, min(10_000, Int64(limit.rlim_cur) - 128)))
    }

    /// Connections one address may hold when `server.max_connections_per_ip` is not set.
    static let defaultConnectionsPerIP = 256

    /// `server.max_connections_per_ip`, nil when it is `0` (off); unset, 256, or a quarter
    /// of `max_connections` when that is less, so that one address can never hold them all.
    static func connectionLimitPerIP(_ settings: ServerSettings) -> Int? {
        switch settings.maxConnectionsPerIP {
        case 0?: nil
        case let limit?: limit
        case nil: min(defaultConnectionsPerIP, max(1, connectionLimit(settings) / 4))
        }
    }

    /// The router with every route and the JSON error middleware, for the providers as
    /// they stand.
    public static func makeRouter(gateway: Gateway) -> Router<GatewayRequestContext> {
        let router = Router(context: GatewayRequestContext.self)
        router.add(middleware: RequestIDMiddleware())
        // Outside ErrorMiddleware, so that it sees the answers errors became.
        if gateway.configuration.server.accessLog { router.add(middleware: AccessLogMiddleware()) }
        let routeMethods = RouteMethods()
        // Before the error middleware, which needs their error shapes.
        let contributions = contributedRoutes(gateway: gateway)
        let errorAnswers = RouteErrorAnswers(contributions)
        router.add(
            middleware: ErrorMiddleware(
                failureLines: gateway.routeState.failureLines, routeMethods: routeMethods, errorAnswers: errorAnswers))
        router.add(middleware: CrossSiteRequests())
        // Always in place, limits or not: a reload may set them.
        let openPaths = Set(gateway.providers.flatMap(\.routes).filter(\.isOpen).map(\.path))
        router.add(
            middleware: RateLimitMiddleware(
                limits: gateway.rateLimits, openRoutes: .init(paths: openPaths), keyring: gateway.keyring,
                trustedProxies: gateway.configuration.server.trustedProxies, metrics: gateway.metrics,
                errorAnswers: errorAnswers))
        addIngestRoutes(to: router, gateway: gateway)
        addContributedRoutes(contributions, to: router, gateway: gateway)
        addOperatorRoutes(to: router, gateway: gateway)
        addReportRoutes(to: router, gateway: gateway)
        addForgetRoutes(to: router, gateway: gateway)
        routeMethods.learn(router)
        return router
    }

    /// The application: the HTTP server plus every sink worker, shut down together.
    /// Graceful shutdown stops accepting, finishes in-flight requests, then stops the
    /// workers after their current batch; anything undelivered stays in the outbox.
    public static func makeApplication(
        gateway: Gateway,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let settings = gateway.configuration.server
        // A provider is on only when listed: a config without `providers:` serves no
        // ingest route, and every post would be a 404 with nothing else to say why.
        if gateway.providers.isEmpty {
            gateway.logger.warning("no provider is enabled: no ingest route is served; list them under providers:")
        }
        if gateway.configuration.auth.apiKeys.isEmpty {
            gateway.logger.warning("auth.api_keys is empty: the app-facing routes accept any caller")
            if settings.rateLimits.perKey != nil {
                gateway.logger.warning("server.rate_limits.per_key limits nothing without auth.api_keys; per_ip does")
            }
        }
        let perIP = connectionLimitPerIP(settings).map { ConnectionCounts(limit: $0, logger: gateway.logger) }
        let router = LiveRouter { makeRouter(gateway: gateway).buildResponder() }
        gateway.liveRouter.withLock { $0 = router }
        return Application(
            responder: router,
            // Connections that go quiet are closed, and so are those whose request is
            // still arriving a second past the body deadline, and those whose answers have
            // not left for the idle timeout: slow clients cannot pile up.
            server: .http1(
                configuration: .init(
                    additionalChannelHandlers: [
                        RequestedClose.install(
                            maxBodyBytes: gateway.providers.flatMap(\.routes).compactMap(\.maxBodyBytes)
                                .reduce(settings.maxBodyBytes, max)),
                        MalformedHTTPAnswer(
                            metrics: gateway.metrics, accessLog: settings.accessLog ? gateway.logger : nil),
                    ]
                        + (perIP.map { counts in
                            [
                                ConnectionsPerIP(
                                    counts: counts, trusted: settings.trustedProxies, metrics: gateway.metrics)
                            ]
                        } ?? []) + [
                            RequestReadDeadline(
                                timeout: .milliseconds(Int64(settings.bodyTimeoutMs) + 1000),
                                firstHeadTimeout: .milliseconds(Int64(settings.requestHeadTimeoutMs))),
                            StalledWriteTimeout(timeout: .milliseconds(Int64(settings.idleTimeoutMs))),
                        ],
                    idleTimeout: .milliseconds(Int64(settings.idleTimeoutMs)))),
            configuration: .init(
                address: .hostname(settings.host, port: settings.port), serverName: nil,
                // Connections past the limit wait to be accepted: accepted, idle ones from one
                // client could take every descriptor, and the store and the sinks could open
                // nothing.
                availableConnectionsDelegate: .maximum(connectionLimit(settings), logger: gateway.logger)),
            // Stopped in reverse order: the server first, the checkpointer last, so that
            // its final checkpoint comes after the workers' last writes, which come after
            // the resolvers' and late writers'.
            services: [gateway.checkpointer].compactMap { $0 as (any Service)? }
                + [gateway.sinkWorkers as any Service, gateway.companions as any Service]
                + [gateway.retention as (any Service)?, gateway.reportIndexer as (any Service)?].compactMap { $0 },
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? settings.port
                gateway.logger.info("gateway listening", metadata: ["address": "\(settings.host):\(port)"])
                await onServerRunning(port)
            },
            logger: gateway.logger)
    }
}
