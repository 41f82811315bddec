import GatewayConfig
import GatewayCore
import Logging

/// One enabled provider as it runs: what it was built from, its resolver of pending work
/// when it is a ``DeferredAttributionProvider``, and the routes it contributes, made once
/// with that resolver (they wire themselves to it). A reload that changes the provider's
/// settings builds all three again; the new resolver answers the requests that wait on
/// the one it follows.
struct RunningProvider: Sendable {
    let prepared: PreparedProvider
    let provider: any AttributionProvider
    /// Its ingest routes, asked once: a provider makes them at each call (`s2s` one per
    /// vendor's callback), and each request checks its route is still among them.
    let routes: [ProviderRoute]
    let resolver: PendingResolver?
    let contributions: [ContributedRoute]

    var name: String { provider.name }

    init(
        _ prepared: PreparedProvider, _ provider: any AttributionProvider, pipeline: IngestPipeline, logger: Logger,
        following previous: RunningProvider? = nil
    ) {
        self.prepared = prepared
        self.provider = provider
        routes = provider.routes
        resolver = (provider as? any DeferredAttributionProvider).map {
            PendingResolver(
                provider: $0, pipeline: pipeline, logger: logger,
                waiters: previous?.resolver?.waiters ?? AnswerWaiters())
        }
        contributions = prepared.routes(ProviderRouteContext(pipeline: pipeline, resolver: resolver, logger: logger))
    }

    /// The most bytes of quarantined postbacks it keeps, when it takes postbacks.
    var quarantineCap: Int? { (provider as? any PostbackProvider)?.quarantineMaxBytes }
}

/// The names of what runs beside the server in ``Gateway/companions``.
enum Companion {
    static let quarantine = "quarantine"
    static let enricherServicePrefix = "enricher-service."

    static func resolver(_ provider: String) -> String { "resolver.\(provider)" }
    static func lateWriter(_ enricher: String) -> String { "late-writer.\(enricher)" }
    static func enricherServices(of enricher: String) -> String { "\(enricherServicePrefix)\(enricher)." }
    static func enricherService(_ enricher: String, _ index: Int) -> String {
        "\(enricherServices(of: enricher))\(index)"
    }
}

extension Gateway {
    /// Runs the resolvers of the providers named in `changed` (enabled, or rebuilt with
    /// new settings) and stops those of `removed`; a changed resolver starts once its
    /// predecessor has finished its round. The quarantine's trimmer follows the caps of
    /// the providers as they stand.
    func startCompanions(providers running: [RunningProvider], changed: Set<String>, removed: Set<String>) {
        for name in removed { companions.stop(Companion.resolver(name)) }
        for provider in running where changed.contains(provider.name) {
            if let resolver = provider.resolver {
                companions.start(Companion.resolver(provider.name), resolver, value: resolver)
            } else {
                companions.stop(Companion.resolver(provider.name))
            }
        }
        let caps = Dictionary(running.compactMap { provider in provider.quarantineCap.map { (provider.name, $0) } }) {
            first, _ in first
        }
        guard caps != quarantineTrimmer?.caps else { return }
        if caps.isEmpty {
            companions.stop(Companion.quarantine)
        } else {
            let trimmer = QuarantineTrimmer(store: store, caps: caps, metrics: metrics, logger: logger)
            companions.start(Companion.quarantine, trimmer, value: trimmer)
        }
    }

    /// Runs the late writer and own services of the enrichers named in `changed` (enabled
    /// or rebuilt) and stops those of `removed` and those a rebuilt enricher no longer has.
    /// A late writer stopped leaves what it still owes in the store, where its successor's
    /// first scan finds it.
    func startCompanions(
        enrichers: [(typeName: String, enricher: any Enricher)], changed: Set<String>, removed: Set<String>
    ) {
        let owned = companions.values.keys
        func stopAll(of enricher: String) {
            companions.stop(Companion.lateWriter(enricher))
            for name in owned where name.hasPrefix(Companion.enricherServices(of: enricher)) {
                companions.stop(name)
            }
        }
        for name in removed { stopAll(of: name) }
        for (typeName, enricher) in enrichers where changed.contains(typeName) {
            stopAll(of: typeName)
            if let late = enricher as? any LateEnricher {
                let writer = LateRecordWriter(enricher: late, pipeline: pipeline, logger: logger)
                companions.start(Companion.lateWriter(typeName), writer, value: writer)
            }
            for (index, service) in ((enricher as? any EnricherWithServices)?.services ?? []).enumerated() {
                companions.start(Companion.enricherService(typeName, index), service, value: service)
            }
        }
    }
}
