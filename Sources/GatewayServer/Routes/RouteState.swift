import GatewayConfig
import GatewayCore
import GatewayEnrichers
import Logging

/// What the routes keep from one request to the next, made once per gateway so that a
/// rebuild of the routes (``LiveRouter``) keeps it: a client guessing operator keys stays
/// throttled across a reload, and the caches stay warm.
struct RouteState: Sendable {
    /// The outbox's depths for `/metrics` and `/readyz`.
    let outbox: OutboxStatsCache
    /// The report's one computation, behind its gate.
    let reports: Reports
    /// The dashboard's computations, for its pages' links.
    let snapshots = ReportSnapshots()
    let guesses: OperatorKeyGuesses
    /// Refused dashboard logins, said at most once a minute.
    let refusedLogins = OncePerInterval(.seconds(60))
    /// Failing requests, said at most once a second per error code.
    let failureLines = FailureLines()

    init(configuration: GatewayConfiguration, store: any AttributionStore, logger: Logger) {
        outbox = OutboxStatsCache(store: store)
        reports = Reports(
            store: store, names: KnownNamesCache(storage: configuration.storage, logger: logger))
        guesses = OperatorKeyGuesses(trusted: configuration.server.trustedProxies)
    }
}
