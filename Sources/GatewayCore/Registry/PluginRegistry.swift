import Logging

/// Everything a sink may need to build itself.
public struct SinkContext: Sendable {
    /// The name under `sinks:` in config.yaml.
    public var name: String
    /// The gateway's own SQLite file, for sinks that default to it.
    public var storagePath: String
    /// The gateway's PostgreSQL database when the store is one, for sinks that default to it.
    public var storageURL: PostgresURL?
    public var logger: Logger

    public init(name: String, storagePath: String, storageURL: PostgresURL? = nil, logger: Logger) {
        self.name = name
        self.storagePath = storagePath
        self.storageURL = storageURL
        self.logger = logger
    }
}

/// A sink type that config.yaml can name with `type:`.
///
/// Reading options and building are separate steps so that `check-config` and `serve`
/// can reject a bad file before anything is opened or connected.
public protocol SinkPlugin: SendableMetatype {
    associatedtype Options: Sendable
    /// The `type:` name in config.yaml.
    static var typeName: String { get }
    /// Reads and checks this sink's own keys, reporting problems to the reader; returns
    /// nil when anything was wrong. Keys it does not read are reported as unknown.
    static func readOptions(_ reader: ConfigReader, context: SinkContext) -> Options?
    /// Builds the sink from checked options. Runs only when the whole file is valid.
    static func makeSink(options: Options, context: SinkContext) async throws -> any AttributionSink
    /// One line for `check-config`; must not contain secrets.
    static func summary(_ options: Options) -> String
    /// The delivery settings this destination asks for, before a config's own keys
    /// (Mixpanel wants retries from 2 s to 60 s, for instance).
    static var deliveryDefaults: DeliverySettings { get }
    /// What the sink writes into, where another sink of the config could write too; nil
    /// (the default) for a sink that shares nothing.
    static func target(_ options: Options) -> SinkTarget?
    /// The most records the sink takes in one batch (its `maxBatchSize`), known from its
    /// options so that `check-config` shows the batches delivery will really make; nil
    /// (the default) for a sink that takes whatever `batch_size` says.
    static func maxBatchSize(_ options: Options) -> Int?
}

extension SinkPlugin {
    public static var deliveryDefaults: DeliverySettings { DeliverySettings() }
    public static func target(_ options: Options) -> SinkTarget? { nil }
    public static func maxBatchSize(_ options: Options) -> Int? { nil }
}

/// A table or a view a sink writes, and where: two sinks of a config may share one only
/// when both make it the same kind, since a file or database holds one or the other.
public struct SinkTarget: Sendable, Hashable {
    /// The object and its file or database, as `check-config` names it.
    public var place: String
    /// What the sink makes there: `table` or `view`.
    public var kind: String

    public init(place: String, kind: String) {
        self.place = place
        self.kind = kind
    }
}

/// A provider that config.yaml can enable under `providers:`.
public protocol ProviderPlugin: SendableMetatype {
    associatedtype Options: Sendable
    /// The key under `providers:` and the `provider` of every record it makes.
    static var typeName: String { get }
    static func readOptions(_ reader: ConfigReader) -> Options?
    static func makeProvider(options: Options) throws -> any AttributionProvider
    /// Destinations the provider brings with it, each with its own outbox and route (the
    /// `s2s` provider forwards to its vendors this way). None by default.
    static func sinks(options: Options) -> [ProviderSink]
    /// HTTP routes the provider serves beside its ingest ones (``ContributedRoute``), made
    /// when the provider is built (at the start, or by a reload that changes its settings)
    /// and served while it is enabled. None by default.
    static func routes(options: Options, context: ProviderRouteContext) -> [ContributedRoute]
}

extension ProviderPlugin {
    public static func sinks(options: Options) -> [ProviderSink] { [] }
    public static func routes(options: Options, context: ProviderRouteContext) -> [ContributedRoute] { [] }
}

/// A destination that a provider's config defines rather than `sinks:`: delivered by a
/// worker with an outbox, retries and dead letters like any sink, and fed by its own
/// route so that `routes:` need not mention it.
public struct ProviderSink: Sendable {
    public let prepared: PreparedSink
    public let delivery: DeliverySettings
    /// Which records the provider sends there.
    public let filter: RecordFilter

    public init(prepared: PreparedSink, delivery: DeliverySettings, filter: RecordFilter) {
        self.prepared = prepared
        self.delivery = delivery
        self.filter = filter
    }
}

/// Everything an enricher may need to build itself.
public struct EnricherContext: Sendable {
    /// The gateway's own SQLite file, for an enricher's state, unless `storageURL` is set.
    public var storagePath: String
    /// The gateway's PostgreSQL database, when the store is there: an enricher's state goes
    /// beside it, shared by the replicas.
    public var storageURL: PostgresURL?
    public var logger: Logger
    public var metrics: GatewayMetrics

    public init(
        storagePath: String, storageURL: PostgresURL? = nil, logger: Logger, metrics: GatewayMetrics = .none
    ) {
        self.storagePath = storagePath
        self.storageURL = storageURL
        self.logger = logger
        self.metrics = metrics
    }
}

/// An enricher that config.yaml can enable under `enrichers:`.
public protocol EnricherPlugin: SendableMetatype {
    associatedtype Options: Sendable
    /// The key under `enrichers:`.
    static var typeName: String { get }
    static func readOptions(_ reader: ConfigReader) -> Options?
    static func makeEnricher(options: Options, context: EnricherContext) async throws -> any Enricher
}

/// Checked options for one enricher, ready to build.
public struct PreparedEnricher: Sendable {
    public let typeName: String
    public let build: @Sendable (EnricherContext) async throws -> any Enricher
}

/// Checked options for one sink, ready to build.
public struct PreparedSink: Sendable {
    public let name: String
    public let typeName: String
    public let summary: String
    /// What it writes that another sink could write too (``SinkPlugin/target(_:)``).
    public let target: SinkTarget?
    /// Its own limit on a batch (``SinkPlugin/maxBatchSize(_:)``).
    public let maxBatchSize: Int?
    public let build: @Sendable (SinkContext) async throws -> any AttributionSink

    public init(
        name: String, typeName: String, summary: String, target: SinkTarget? = nil, maxBatchSize: Int? = nil,
        build: @escaping @Sendable (SinkContext) async throws -> any AttributionSink
    ) {
        self.name = name
        self.typeName = typeName
        self.summary = summary
        self.target = target
        self.maxBatchSize = maxBatchSize
        self.build = build
    }
}

/// Checked options for one provider, ready to build.
public struct PreparedProvider: Sendable {
    public let typeName: String
    public let build: @Sendable () throws -> any AttributionProvider
    /// The destinations it brings with it.
    public let sinks: [ProviderSink]
    /// Its contributed routes, for the running gateway.
    public let routes: @Sendable (ProviderRouteContext) -> [ContributedRoute]
}

/// The `type:` names config.yaml may use, each bound to its plugin.
public struct PluginRegistry: Sendable {
    struct SinkEntry: Sendable {
        let prepare: @Sendable (ConfigReader, SinkContext) -> PreparedSink?
        let deliveryDefaults: DeliverySettings
    }
    struct ProviderEntry: Sendable {
        let prepare: @Sendable (ConfigReader) -> PreparedProvider?
    }
    struct EnricherEntry: Sendable {
        let prepare: @Sendable (ConfigReader) -> PreparedEnricher?
    }

    private var sinks: [String: SinkEntry] = [:]
    private var providers: [String: ProviderEntry] = [:]
    private var enrichers: [String: EnricherEntry] = [:]

    public init() {}

    public var sinkTypes: [String] { sinks.keys.sorted() }
    public var providerTypes: [String] { providers.keys.sorted() }
    public var enricherTypes: [String] { enrichers.keys.sorted() }

    /// Makes an enricher available to config.yaml.
    public mutating func register<P: EnricherPlugin>(enricher plugin: P.Type) {
        enrichers[P.typeName] = EnricherEntry { reader in
            guard let options = P.readOptions(reader) else { return nil }
            return PreparedEnricher(
                typeName: P.typeName, build: { context in try await P.makeEnricher(options: options, context: context) }
            )
        }
    }

    public func prepareEnricher(type: String, reader: ConfigReader) -> PreparedEnricher?? {
        guard let entry = enrichers[type] else { return .none }
        return .some(entry.prepare(reader))
    }

    /// Makes a sink type available to config.yaml.
    public mutating func register<P: SinkPlugin>(sink plugin: P.Type) {
        // Two plugins of one type: the second would silently take the first one's configs.
        precondition(sinks[P.typeName] == nil, "two sink plugins are registered as `type: \(P.typeName)`")
        sinks[P.typeName] = SinkEntry(
            prepare: { reader, context in
                guard let options = P.readOptions(reader, context: context) else { return nil }
                return PreparedSink(
                    name: context.name, typeName: P.typeName, summary: P.summary(options), target: P.target(options),
                    maxBatchSize: P.maxBatchSize(options),
                    build: { context in try await P.makeSink(options: options, context: context) })
            },
            deliveryDefaults: P.deliveryDefaults)
    }

    /// Makes a provider available to config.yaml.
    public mutating func register<P: ProviderPlugin>(provider plugin: P.Type) {
        providers[P.typeName] = ProviderEntry { reader in
            guard let options = P.readOptions(reader) else { return nil }
            return PreparedProvider(
                typeName: P.typeName, build: { try P.makeProvider(options: options) }, sinks: P.sinks(options: options),
                routes: { context in P.routes(options: options, context: context) })
        }
    }

    /// The delivery settings a sink type starts from; the generic ones for unknown types.
    public func deliveryDefaults(type: String) -> DeliverySettings {
        sinks[type]?.deliveryDefaults ?? DeliverySettings()
    }

    public func prepareSink(type: String, reader: ConfigReader, context: SinkContext) -> PreparedSink?? {
        guard let entry = sinks[type] else { return .none }
        return .some(entry.prepare(reader, context))
    }

    public func prepareProvider(type: String, reader: ConfigReader) -> PreparedProvider?? {
        guard let entry = providers[type] else { return .none }
        return .some(entry.prepare(reader))
    }
}
