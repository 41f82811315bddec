import Foundation
import GatewayCore
import Testing

@testable import GatewayServer

/// The outbox's counts behind `/metrics` and `/readyz`.
@Suite struct OutboxStatsCacheTests {
    /// Read once per interval however many ask: each read is a scan of the outbox.
    @Test func callersWithinTheIntervalShareOneRead() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try env.configuration(paused: true))
        let cache = OutboxStatsCache(store: gateway.store, maxAge: .seconds(3600))
        #expect(try await cache.stats()["local"] == nil)
        var record = AttributionRecord(provider: "iad", kind: .install, dedupeKey: "iad:1:cached", receivedAt: Date())
        record.appID = "1"
        _ = try await gateway.pipeline.ingest([record])
        #expect(try await gateway.store.outboxStats()["local"]?.depth == 1)
        #expect(try await cache.stats()["local"] == nil)
        let fresh = OutboxStatsCache(store: gateway.store, maxAge: .zero)
        #expect(try await fresh.stats()["local"]?.depth == 1)
    }
}
