import GatewayConfig
import GatewayCore
import GatewayStorage

extension GatewayHTTP {
    /// What a reload from `running` to `reread` runs with: `reread`'s providers, enrichers,
    /// sinks, routes, keys, rate limits and log level, and `running`'s other server
    /// settings and store, which wait for the next start.
    static func liveTarget(from running: GatewayConfiguration, to reread: GatewayConfiguration)
        -> GatewayConfiguration
    {
        var target = running
        target.auth = reread.auth
        target.server.rateLimits = reread.server.rateLimits
        target.server.logLevel = reread.server.logLevel
        target.providers = reread.providers
        target.sinks = reread.sinks
        target.routes = reread.routes
        target.enrichers = reread.enrichers
        target.pluginSettings = reread.pluginSettings
        return target
    }

    /// What going from `running` to `target` removes, by name (none is secret): providers,
    /// sinks, enrichers and routes.
    static func removals(from running: GatewayConfiguration, to target: GatewayConfiguration) -> [String] {
        var removed = running.providers.map(\.typeName).filter { name in
            !target.providers.contains { $0.typeName == name }
        }
        .map { "provider \($0)" }
        removed += running.sinks.map(\.name).filter { name in !target.sinks.contains { $0.name == name } }
            .map { "sink \($0)" }
        removed += running.enrichers.map(\.typeName).filter { name in !target.enrichers.contains { $0.typeName == name }
        }
        .map { "enricher \($0)" }
        var remaining = target.routes
        var routes = 0
        for route in running.routes {
            if let index = remaining.firstIndex(of: route) { remaining.remove(at: index) } else { routes += 1 }
        }
        if routes > 0 { removed.append("\(routes) of \(running.routes.count) routes") }
        return removed
    }
}

extension Gateway {
    /// Swaps the running providers, enrichers, sinks and routes for `target`'s (see
    /// ``GatewayHTTP/liveTarget(from:to:)``). Everything new is built first: one that
    /// cannot be built throws, and nothing changed. Then new and changed sinks' workers
    /// start (a changed one after its old worker finished its batch), the router and
    /// enrichers swap for the next record, the providers and the HTTP routes for the next
    /// request, what runs beside them (resolvers, late writers) follows, and the workers
    /// of removed sinks stop after their batch, their outbox rows waiting.
    func swapLive(from running: GatewayConfiguration, to target: GatewayConfiguration) async throws {
        func settingsChanged(_ key: String) -> Bool { running.pluginSettings[key] != target.pluginSettings[key] }

        let currentProviders = runningProviders.withLock { $0 }
        var providers: [RunningProvider] = []
        var rebuiltProviders: Set<String> = []
        for prepared in target.providers {
            if !settingsChanged("providers.\(prepared.typeName)"),
                let kept = currentProviders.first(where: { $0.name == prepared.typeName })
            {
                providers.append(kept)
            } else {
                rebuiltProviders.insert(prepared.typeName)
                providers.append(
                    RunningProvider(
                        prepared, try prepared.build(), pipeline: pipeline, logger: logger,
                        following: currentProviders.first { $0.name == prepared.typeName }))
            }
        }
        let removedProviders = Set(currentProviders.map(\.name)).subtracting(providers.map(\.name))

        let current = liveEnrichers.withLock { $0 }
        var enrichers: [(typeName: String, enricher: any Enricher)] = []
        var rebuiltEnrichers: Set<String> = []
        for prepared in target.enrichers {
            if !settingsChanged("enrichers.\(prepared.typeName)"),
                let kept = current.first(where: { $0.typeName == prepared.typeName })
            {
                enrichers.append(kept)
            } else {
                rebuiltEnrichers.insert(prepared.typeName)
                enrichers.append(
                    (
                        prepared.typeName,
                        try await Gateway.buildEnricher(
                            prepared, configuration: configuration, metrics: metrics, logger: logger)
                    ))
            }
        }
        let removedEnrichers = Set(current.map(\.typeName)).subtracting(enrichers.map(\.typeName))

        let before = Dictionary(running.sinks.map { ($0.name, $0) }) { first, _ in first }
        let changed = target.sinks.filter { sink in
            guard let old = before[sink.name] else { return true }
            // A provider's destinations have no settings of their own: their provider's are.
            let key = ConfigurationDiff.provider(ofSink: sink.name).map { "providers.\($0)" } ?? "sinks.\(sink.name)"
            return old.prepared.typeName != sink.prepared.typeName || old.delivery != sink.delivery
                || settingsChanged(key)
        }
        // From now until their new workers run, their restart is not a stopped sink at
        // `/readyz`.
        for sink in changed { health.handOver(sink.name) }
        var built: [BuiltSink] = []
        do {
            for sink in changed {
                built.append(
                    try await Gateway.buildSink(
                        sink, configuration: configuration, store: store, metrics: metrics, health: health,
                        logger: logger))
            }
        } catch {
            for sink in built { await sink.sink.shutdown() }
            // A new sink's worker, built and never run, is not expected at `/readyz`.
            for sink in changed {
                if before[sink.name] == nil { health.forget(sink.name) } else { health.handOver(sink.name, false) }
            }
            throw error
        }

        let added = changed.map(\.name).filter { before[$0] == nil }
        let enabled = providers.filter { provider in !currentProviders.contains { $0.name == provider.name } }
            .map(\.provider)
        metrics.registerAtZero(
            providers: enabled.map(\.name),
            postbackProviders: enabled.filter { $0 is any PostbackProvider }.map(\.name),
            deferredProviders: enabled.filter { $0 is any DeferredAttributionProvider }.map(\.name),
            enrichers: enrichers.map(\.typeName).filter { name in !current.contains { $0.typeName == name } },
            sinks: added)
        for sink in built { sink.start(in: sinkWorkers, store: inlineStore) }
        pipeline.swap(
            router: RecordRouter(routes: target.routes, countingEveryCopy: sinkWorkers.countingEveryCopy),
            enrichers: enrichers.map(\.enricher))
        liveEnrichers.withLock { $0 = enrichers }
        runningProviders.withLock { $0 = providers }
        liveRouter.withLock { $0 }?.rebuild()
        startCompanions(providers: providers, changed: rebuiltProviders, removed: removedProviders)
        startCompanions(enrichers: enrichers, changed: rebuiltEnrichers, removed: removedEnrichers)
        for name in before.keys where !target.sinks.contains(where: { $0.name == name }) {
            inlineStore?.stopDeliveringInline(sink: name)
            sinkWorkers.stop(name)
        }
    }
}
