import GatewayConfig
import GatewayCore
import GatewayEnrichers
import GatewayStorage

extension GatewayHTTP {
    /// Whether a reload swaps enricher `typeName` (enabled, disabled or changed) for the
    /// next record: not one whose answers may come after routing (`keyword_lookup`), whose
    /// late writer runs from the start holding it.
    static func enricherSwapsLive(_ typeName: String) -> Bool {
        typeName != KeywordLookupPlugin.typeName
    }

    /// Whether a reload can swap provider `name`, changed from `old` to `new`, between
    /// requests: only when it serves the same routes (they are mounted at the start), and
    /// when the server wires nothing else to it at the start (a resolver, contributed
    /// routes, a quarantine's cap: its plugin's ``ProviderPlugin/swapsLive``).
    static func providerSwapsLive(_ name: String, from old: GatewayConfiguration, to new: GatewayConfiguration)
        -> Bool
    {
        guard let before = old.providers.first(where: { $0.typeName == name }),
            let after = new.providers.first(where: { $0.typeName == name }),
            before.swapsLive, after.swapsLive, let running = try? before.build(), let next = try? after.build()
        else { return false }
        if running is any DeferredAttributionProvider { return false }
        return Set(running.routes) == Set(next.routes)
    }

    /// What a reload from `old` to `new` changes, each change marked as a reload applies it:
    /// for the reload's log and for `check-config --diff`.
    public static func reloadDiff(from old: GatewayConfiguration, to new: GatewayConfiguration) -> ConfigurationDiff {
        ConfigurationDiff(
            from: old, to: new, providerSwapsLive: { providerSwapsLive($0, from: old, to: new) },
            enricherSwapsLive: { enricherSwapsLive($0) })
    }

    /// What a reload from `running` to `reread` runs with: `reread`'s providers, enrichers,
    /// sinks, routes, keys and rate limits, but for what waits for the next start, which
    /// stays as it runs (a provider enabled, disabled or changed beyond a swap, with its
    /// own destinations and their routes; an enricher held at the start; the server's
    /// other settings and the store).
    static func liveTarget(from running: GatewayConfiguration, to reread: GatewayConfiguration)
        -> GatewayConfiguration
    {
        let held = ConfigurationDiff.providersHeld(running, reread) { providerSwapsLive($0, from: running, to: reread) }
        func heldSink(_ name: String) -> Bool { held.contains(ConfigurationDiff.provider(ofSink: name) ?? "") }
        func heldRoute(_ route: Route) -> Bool { route.sinks.contains(where: heldSink) }
        var target = running
        target.auth = reread.auth
        target.server.rateLimits = reread.server.rateLimits
        target.providers = running.providers.map { provider in
            held.contains(provider.typeName)
                ? provider : reread.providers.first { $0.typeName == provider.typeName } ?? provider
        }
        target.sinks = reread.sinks.filter { !heldSink($0.name) } + running.sinks.filter { heldSink($0.name) }
        target.routes = reread.routes.filter { !heldRoute($0) } + running.routes.filter { heldRoute($0) }
        let heldEnrichers = Set(
            (running.enrichers + reread.enrichers).map(\.typeName).filter { !enricherSwapsLive($0) })
        target.enrichers =
            reread.enrichers.compactMap { enricher in
                heldEnrichers.contains(enricher.typeName)
                    ? running.enrichers.first { $0.typeName == enricher.typeName } : enricher
            }
            + running.enrichers.filter { enricher in
                heldEnrichers.contains(enricher.typeName)
                    && !reread.enrichers.contains { $0.typeName == enricher.typeName }
            }
        var settings = reread.pluginSettings
        let kept =
            held.map { "providers.\($0)" } + heldEnrichers.map { "enrichers.\($0)" }
        for key in kept { settings[key] = running.pluginSettings[key] }
        target.pluginSettings = settings
        return target
    }

    /// What going from `running` to `target` removes, by name (none is secret): sinks,
    /// enrichers and routes.
    static func removals(from running: GatewayConfiguration, to target: GatewayConfiguration) -> [String] {
        var removed = running.sinks.map(\.name).filter { name in !target.sinks.contains { $0.name == name } }
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
    /// enrichers swap for the next record, the providers for the next request, and the
    /// workers of removed sinks stop after their batch, their outbox rows waiting.
    func swapLive(from running: GatewayConfiguration, to target: GatewayConfiguration) async throws {
        func settingsChanged(_ key: String) -> Bool { running.pluginSettings[key] != target.pluginSettings[key] }

        var providers: [String: any AttributionProvider] = [:]
        for prepared in target.providers where settingsChanged("providers.\(prepared.typeName)") {
            providers[prepared.typeName] = try prepared.build()
        }

        let current = liveEnrichers.withLock { $0 }
        var enrichers: [(typeName: String, enricher: any Enricher)] = []
        for prepared in target.enrichers {
            if !settingsChanged("enrichers.\(prepared.typeName)"),
                let kept = current.first(where: { $0.typeName == prepared.typeName })
            {
                enrichers.append(kept)
            } else {
                enrichers.append(
                    (
                        prepared.typeName,
                        try await Gateway.buildEnricher(
                            prepared, configuration: configuration, metrics: metrics, logger: logger)
                    ))
            }
        }

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
        if !added.isEmpty { metrics.registerAtZero(providers: [], postbackProviders: [], sinks: added) }
        for sink in built { sink.start(in: sinkWorkers, sqlite: sqlite) }
        pipeline.swap(
            router: RecordRouter(routes: target.routes, countingEveryCopy: sinkWorkers.countingEveryCopy),
            enrichers: enrichers.map(\.enricher))
        liveEnrichers.withLock { $0 = enrichers }
        liveProviders.withLock { running in
            running = running.map { providers[$0.name] ?? $0 }
        }
        for name in before.keys where !target.sinks.contains(where: { $0.name == name }) {
            sqlite?.stopDeliveringInline(sink: name)
            sinkWorkers.stop(name)
        }
    }
}
