import Foundation
import GatewayConfig
import GatewayCore
import GatewayPostgres
import GatewaySinks
import GatewayStorage
import Logging
import Prometheus
import ServiceLifecycle
import Synchronization

/// A running gateway's parts, built from a checked configuration: the store, the
/// providers, the ingest pipeline and one delivery worker per sink. A reload swaps the
/// providers, enrichers, sinks and routes (see ``ConfigReloader``).
public final class Gateway: Sendable {
    /// The configuration the gateway started with.
    public let configuration: GatewayConfiguration
    public let store: any AttributionStore
    /// The embedded store's own parts (sink rows written with records, WAL checkpoints,
    /// commit health); nil when the store is PostgreSQL.
    public let sqlite: SQLiteStore?
    /// The store's sinks written with each commit, on either backend.
    var inlineStore: (any InlineDeliveryStore)? { store as? any InlineDeliveryStore }
    /// The providers as they stand: a request takes its provider once, at its start.
    public var providers: [any AttributionProvider] { runningProviders.withLock { $0.map(\.provider) } }
    /// The enabled providers as they stand, with what the gateway wired to each.
    let runningProviders: Mutex<[RunningProvider]>
    /// The enrichers as they stand, with the `type:` each was built from.
    let liveEnrichers: Mutex<[(typeName: String, enricher: any Enricher)]>
    public let pipeline: IngestPipeline
    /// One worker per sink, as they stand.
    public var workers: [SinkWorker] { sinkWorkers.workers }
    public let sinkWorkers: LiveSinkWorkers
    /// What runs beside the server for the providers and enrichers of the moment: each
    /// deferred provider's resolver, the quarantine's trimmer, each late enricher's writer
    /// and each enricher's own services (see ``GatewayHTTP/companionName``).
    let companions: LiveServices<any Service>
    /// One per deferred provider (AdServices), keyed by provider name, as they stand.
    public var resolvers: [String: PendingResolver] {
        runningProviders.withLock { running in
            Dictionary(running.compactMap { provider in provider.resolver.map { (provider.name, $0) } }) { a, _ in a }
        }
    }
    /// Enrichers' own work beside the server (keyword_lookup's daily spend fetch), as it stands.
    public var enricherServices: [any Service] {
        companions.values.filter { $0.key.hasPrefix(Companion.enricherServicePrefix) }.sorted { $0.key < $1.key }
            .map(\.value)
    }
    /// Keeps quarantined postbacks within `quarantine_max_mb`; nil without a postback provider.
    public var quarantineTrimmer: QuarantineTrimmer? {
        companions.value(named: Companion.quarantine) as? QuarantineTrimmer
    }
    /// The HTTP routes as they stand, once the application is made.
    let liveRouter = Mutex<LiveRouter?>(nil)
    /// What the routes keep across their rebuilds.
    let routeState: RouteState
    public let health: WorkerHealth
    /// Checkpoints the SQLite store's write-ahead log off the commit path while the server runs.
    public let checkpointer: WALCheckpointer?
    /// Applies `storage.retention`, when it sets a limit.
    public let retention: RetentionJob?
    /// Keeps the report index up with the records, for a store that keeps one.
    public let reportIndexer: ReportIndexer?
    public let metricsRegistry: PrometheusCollectorRegistry
    public let metrics: GatewayMetrics
    public let logger: Logger
    /// Set by the first shutdown signal (see ``GatewayHTTP/run(gateway:signals:)``).
    public let shutdown = ShutdownState()
    /// `auth.api_keys` as they stand: the configuration's at the start, then each reload's.
    let keyring: APIKeyring
    /// `auth.operator_keys` as they stand: the configuration's at the start, then each reload's.
    let operatorKeys: OperatorKeys
    /// `server.rate_limits` as they stand, likewise.
    let rateLimits: LiveRateLimits
    /// Forget requests, for the route: queued for every sink named.
    public let forgetRequests: ForgetRequests

    init(
        configuration: GatewayConfiguration, store: any AttributionStore, providers: [RunningProvider],
        enrichers: [(typeName: String, enricher: any Enricher)],
        pipeline: IngestPipeline, sinkWorkers: LiveSinkWorkers, companions: LiveServices<any Service>,
        health: WorkerHealth, checkpointer: WALCheckpointer?,
        metricsRegistry: PrometheusCollectorRegistry, metrics: GatewayMetrics, logger: Logger
    ) {
        self.configuration = configuration
        self.store = store
        sqlite = store as? SQLiteStore
        runningProviders = Mutex(providers)
        liveEnrichers = Mutex(enrichers)
        self.pipeline = pipeline
        self.sinkWorkers = sinkWorkers
        self.companions = companions
        self.health = health
        self.checkpointer = checkpointer
        let storage = configuration.storage
        retention =
            storage.rawDays > 0 || storage.recordsDays > 0
            ? RetentionJob(
                store: store, limits: .init(rawDays: storage.rawDays, recordsDays: storage.recordsDays),
                metrics: metrics,
                logger: logger.with(metadataKey: "job", value: "retention"))
            : nil
        reportIndexer = (store as? any ReportIndexStore).map {
            ReportIndexer(store: $0, logger: logger.with(metadataKey: "job", value: "report_index"))
        }
        self.metricsRegistry = metricsRegistry
        self.metrics = metrics
        self.logger = logger
        keyring = APIKeyring(keys: configuration.auth.apiKeys)
        operatorKeys = OperatorKeys(configuration.auth)
        rateLimits = LiveRateLimits(configuration.server.rateLimits)
        routeState = RouteState(configuration: configuration, store: store, logger: logger)
        // The sinks of the moment: a reload adds and removes them.
        forgetRequests = ForgetRequests(
            store: store, sinks: { sinkWorkers.workers.map(\.sinkName) }, metrics: metrics,
            logger: logger.with(metadataKey: "job", value: "forget")
        ) { sinkWorkers.worker(named: $0)?.wake() }
    }

    /// The store that `storage` names: a PostgreSQL database, or the SQLite file.
    /// `onWait` is told when the store waits for another process upgrading its tables.
    public static func openStore(
        _ configuration: GatewayConfiguration, upgrade: SQLiteStore.SchemaUpgrade = .unlessServed,
        logger: Logger = Logger(label: "gateway"), onWait: (String) -> Void = { _ in }
    ) async throws -> any AttributionStore {
        if let postgres = configuration.storage.postgres {
            return try await PostgresStore(
                url: postgres.url, poolSize: postgres.poolSize, outboxLease: .seconds(postgres.leaseSeconds),
                logger: logger.with(metadataKey: "store", value: "postgres"))
        }
        return try openSQLiteStore(configuration, upgrade: upgrade, onWait: onWait)
    }

    /// The store that `storage.sqlite` names, with its durability: for the server and for
    /// the commands that read or write the store without one.
    /// `onWait` is told when the store waits for another process upgrading its tables.
    public static func openSQLiteStore(
        _ configuration: GatewayConfiguration, upgrade: SQLiteStore.SchemaUpgrade = .unlessServed,
        onWait: (String) -> Void = { _ in }
    ) throws -> SQLiteStore {
        let durability = SQLiteDatabase.Durability(rawValue: configuration.storage.durability) ?? .full
        return try SQLiteStore(
            path: configuration.storage.sqlitePath, durability: durability, upgrade: upgrade, onWait: onWait)
    }

    /// Opens the store and builds every provider and sink. Fails before anything listens
    /// when a sink cannot be built (an unreadable file, a bad key).
    public static func build(
        configuration: GatewayConfiguration, logger: Logger = Logger(label: "gateway"),
        upgrade: SQLiteStore.SchemaUpgrade = .unlessServed, onWait: (String) -> Void = { _ in }
    ) async throws -> Gateway {
        let store = try await openStore(configuration, upgrade: upgrade, logger: logger, onWait: onWait)
        let sqlite = store as? SQLiteStore
        let inlineStore = store as? any InlineDeliveryStore
        let providers = try configuration.providers.map { try $0.build() }
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        // Delivery takes from milliseconds to days (retries, outages, replays).
        factory.durationHistogramBuckets["gateway_delivery_latency_seconds"] = [
            .milliseconds(10), .milliseconds(50), .milliseconds(250), .seconds(1), .seconds(5), .seconds(30),
            .seconds(120), .seconds(600), .seconds(3600), .seconds(6 * 3600), .seconds(86400),
        ]
        let metrics = GatewayMetrics(factory: factory)
        metrics.registerAtZero(
            providers: providers.map(\.name),
            postbackProviders: providers.filter { $0 is any PostbackProvider }.map(\.name),
            deferredProviders: providers.filter { $0 is any DeferredAttributionProvider }.map(\.name),
            enrichers: configuration.enrichers.map(\.typeName), sinks: configuration.sinks.map(\.name))
        let health = WorkerHealth()

        let sinkWorkers = LiveSinkWorkers(health: health, logger: logger)
        for configured in configuration.sinks {
            if sqlite == nil, configured.prepared.typeName == SQLiteSinkPlugin.typeName {
                logger.warning(
                    "a sqlite sink writes a file on this replica's own disk; with replicas on PostgreSQL each holds part of the records, and a postgres sink keeps them in one table",
                    metadata: ["sink": "\(configured.name)"])
            }
            let built = try await buildSink(
                configured, configuration: configuration, store: store, metrics: metrics, health: health,
                logger: logger)
            built.start(in: sinkWorkers, store: inlineStore)
        }
        let countingSinks = sinkWorkers.countingEveryCopy
        if let settled = try await sqlite?.settleRestoredBackup(
            counting: countingSinks.sorted(), built: configuration.sinks.map(\.name))
        {
            let moved = settled.deadLettered.values.reduce(0, +)
            logger.warning(
                "this store is a backup's copy, run on for the first time",
                metadata: [
                    "backup_taken_at": "\(ISO8601.format(settled.takenAt))",
                    "dead_lettered": "\(moved)",
                    "sinks": "\(settled.deadLettered.keys.sorted().joined(separator: ","))",
                    "next": "\(moved == 0 ? "nothing to do" : "check each destination, then dlq retry what it lacks")",
                ])
        }
        let named = Set(configuration.sinks.map(\.name))
        for (sink, stats) in (try await store.outboxStats()).sorted(by: { $0.key < $1.key }) where !named.contains(sink)
        {
            logger.warning(
                "the outbox holds records for a sink config.yaml does not name; they wait until it is named again",
                metadata: ["sink": "\(sink)", "records": "\(stats.depth)"])
        }
        // Inline sinks get no outbox rows from ingests, so nothing to wake their workers
        // for, unless a record could not be written with its row and went to the outbox.
        inlineStore?.observeInline(
            InlineDeliveryReporter(metrics: metrics, logger: logger) { sinkWorkers.worker(named: $0)?.wake() })
        var enrichers: [(typeName: String, enricher: any Enricher)] = []
        for prepared in configuration.enrichers {
            enrichers.append(
                (
                    prepared.typeName,
                    try await buildEnricher(prepared, configuration: configuration, metrics: metrics, logger: logger)
                ))
        }
        let companions = LiveServices<any Service>(logger: logger)
        let pipeline = IngestPipeline(
            store: store, router: RecordRouter(routes: configuration.routes, countingEveryCopy: countingSinks),
            enrichers: enrichers.map(\.enricher), metrics: metrics,
            onStored: { sinks in
                let inlineSinks = inlineStore?.inlineSinkNames ?? []
                for sink in sinks where !inlineSinks.contains(sink) { sinkWorkers.worker(named: sink)?.wake() }
            },
            onQueued: { sinks in
                for sink in sinks { sinkWorkers.worker(named: sink)?.wake() }
            },
            onQuarantined: { (companions.value(named: Companion.quarantine) as? QuarantineTrimmer)?.stored() })
        let running = zip(configuration.providers, providers).map { prepared, provider in
            RunningProvider(prepared, provider, pipeline: pipeline, logger: logger)
        }
        let resolving = Set(running.filter { $0.resolver != nil }.map(\.name))
        for (provider, count) in (try await store.pendingCounts()).sorted(by: { $0.key < $1.key })
        where !resolving.contains(provider) && count > 0 {
            logger.warning(
                "tokens wait for a provider config.yaml does not enable; nothing resolves them until it is enabled again, and Apple forgets a token a day after it was made",
                metadata: ["provider": "\(provider)", "tokens": "\(count)"])
        }
        let gateway = Gateway(
            configuration: configuration, store: store, providers: running, enrichers: enrichers,
            pipeline: pipeline, sinkWorkers: sinkWorkers, companions: companions, health: health,
            checkpointer: sqlite.map { WALCheckpointer(store: $0, logger: logger) }, metricsRegistry: registry,
            metrics: metrics, logger: logger)
        gateway.startCompanions(providers: running, changed: Set(running.map(\.name)), removed: [])
        gateway.startCompanions(enrichers: enrichers, changed: Set(enrichers.map(\.typeName)), removed: [])
        return gateway
    }

    /// A sink built from config.yaml, ready to run: its worker and, for a sink whose rows
    /// live in the store's own database, how the store writes them with each record's commit.
    struct BuiltSink {
        let sink: any AttributionSink
        let worker: SinkWorker
        let countsEveryCopy: Bool
        let inline: (@Sendable () -> Void)?

        /// Runs the worker in `workers` (after the sink's previous worker, if any, stopped)
        /// and writes the sink's rows with each commit when it can, or else through its
        /// outbox.
        func start(in workers: LiveSinkWorkers, store: (any InlineDeliveryStore)?) {
            if let inline {
                inline()
            } else {
                store?.stopDeliveringInline(sink: worker.sinkName)
            }
            workers.start(worker, countsEveryCopy: countsEveryCopy)
        }
    }

    static func buildSink(
        _ configured: ConfiguredSink, configuration: GatewayConfiguration, store: any AttributionStore,
        metrics: GatewayMetrics, health: WorkerHealth, logger: Logger
    ) async throws -> BuiltSink {
        let context = SinkContext(
            name: configured.name, storagePath: configuration.storage.sqlitePath,
            storageURL: configuration.storage.postgres?.url,
            logger: logger.with(metadataKey: "sink", value: configured.name))
        let sink = try await configured.prepared.build(context)
        // A paused sink keeps its records in its outbox until it is resumed, and one in
        // device order must let a device's waiting records go first.
        var inline: (@Sendable () -> Void)?
        if !configured.delivery.paused && !configured.delivery.inDeviceOrder {
            if let sqlite = store as? SQLiteStore,
                let delivery = (sink as? InlineDeliverable)?.inlineDelivery(sinkName: configured.name, into: sqlite)
            {
                inline = { sqlite.deliverInline(delivery) }
            } else if let postgres = store as? PostgresStore, let view = sink as? PostgresViewSink {
                inline = { postgres.listInline(sink: configured.name, table: view.listTable) }
            }
        }
        let worker = SinkWorker(
            sinkName: configured.name, sink: ForgettingSink(sink, sinkName: configured.name, store: store),
            store: store, settings: configured.delivery, metrics: metrics, logger: logger, health: health)
        return BuiltSink(sink: sink, worker: worker, countsEveryCopy: sink.countsEveryCopy, inline: inline)
    }

    static func buildEnricher(
        _ prepared: PreparedEnricher, configuration: GatewayConfiguration, metrics: GatewayMetrics, logger: Logger
    ) async throws -> any Enricher {
        let context = EnricherContext(
            storagePath: configuration.storage.sqlitePath, storageURL: configuration.storage.postgres?.url,
            logger: logger.with(metadataKey: "enricher", value: prepared.typeName), metrics: metrics)
        return try await prepared.build(context)
    }

    /// The provider enabled under this name, if any.
    public func provider(named name: String) -> (any AttributionProvider)? {
        runningProvider(named: name)?.provider
    }

    /// The provider enabled under this name, with what the gateway wired to it, if any.
    func runningProvider(named name: String) -> RunningProvider? {
        runningProviders.withLock { $0.first { $0.name == name } }
    }
}

extension Logger {
    func with(metadataKey key: String, value: String) -> Logger {
        var copy = self
        copy[metadataKey: key] = .string(value)
        return copy
    }
}
