import GatewayCore

/// The outbox's depth and oldest row per sink, read at most once a second however many
/// probes and scrapers ask. Counting is a scan of the outbox: with a large backlog queued
/// (the outage that queued it is when probes keep coming) each read is slow, and a few
/// pollers of `/metrics` would slow ingest many times over.
actor OutboxStatsCache {
    let store: any OutboxStore
    let maxAge: Duration
    private var cached: (at: ContinuousClock.Instant, stats: [String: OutboxStats])?
    private var reading: Task<[String: OutboxStats], any Error>?
    /// Every sink reported so far, so that one whose rows are all gone reads 0, not its
    /// last depth, when it is no longer in config.yaml.
    private(set) var seen: Set<String> = []

    init(store: any OutboxStore, maxAge: Duration = .seconds(1)) {
        self.store = store
        self.maxAge = maxAge
    }

    func stats() async throws -> [String: OutboxStats] {
        if let cached, ContinuousClock.now - cached.at < maxAge { return cached.stats }
        // Callers that arrive during a read share it.
        let read = reading ?? Task { [store] in try await store.outboxStats() }
        reading = read
        defer { reading = nil }
        let stats = try await read.value
        cached = (ContinuousClock.now, stats)
        seen.formUnion(stats.keys)
        return stats
    }
}
