import Foundation
import GRDB
import GatewayConfig
import GatewayCore
import GatewayServer
import Hummingbird
import HummingbirdTesting
import Testing

/// Which sinks a built gateway writes inline: the SQLite sink on the store's file, but
/// not one that is paused, keeps device order, or lives in another file.
@Suite struct InlineSinkWiringTests {
    @Test func onlyAnActiveUnorderedSQLiteSinkOnTheStoresFileIsInline() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let other = env.directory.appendingPathComponent("other.sqlite").path
        let yaml = """
            storage: { sqlite: { path: \(env.databasePath), durability: normal } }
            providers: { iad: { enabled: true } }
            sinks:
              inline: { type: sqlite }
              held: { type: sqlite, paused: true }
              ordered: { type: sqlite, in_device_order: true }
              elsewhere: { type: sqlite, path: \(other) }
            routes:
              - sinks: [inline, held, ordered, elsewhere]
            """
        let configuration = try ConfigLoader.parse(yaml: yaml, file: "test.yaml", environment: [:], registry: .builtIn)
        let gateway = try await Gateway.build(configuration: configuration)
        #expect(gateway.sqlite!.inlineSinkNames == ["inline"])

        let payload = IngestPayload(
            body: Data(IAdPayloads.attributed(user: "wired").utf8), receivedAt: Date(), path: "/v1/iad")
        let provider = try #require(gateway.providers.first { $0.name == "iad" })
        let outcome = try #require(try await gateway.pipeline.accept(payload, provider: provider).first)
        let queued = try await gateway.sqlite!.pool.read { db in
            try String.fetchAll(db, sql: "SELECT sink FROM outbox ORDER BY sink")
        }
        #expect(queued == ["elsewhere", "held", "ordered"])
        let inlineRows = try await gateway.sqlite!.pool.read { db in
            try String.fetchAll(db, sql: "SELECT record_id FROM attribution_records")
        }
        #expect(inlineRows == [outcome.recordID])
    }

    @Test func aRowThatUndidItsTransactionIsCountedAsAFallbackAndQueued() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let yaml = """
            storage: { sqlite: { path: \(env.databasePath), durability: normal } }
            providers: { iad: { enabled: true } }
            sinks: { local: { type: sqlite } }
            """
        let configuration = try ConfigLoader.parse(yaml: yaml, file: "test.yaml", environment: [:], registry: .builtIn)
        let gateway = try await Gateway.build(configuration: configuration)
        // As a full disk can: the sink's row rolls the whole transaction back.
        try await gateway.sqlite!.pool.write { db in
            try db.execute(
                sql: """
                    CREATE TRIGGER refuse BEFORE INSERT ON attribution_records
                    BEGIN SELECT RAISE(ROLLBACK, 'refused'); END;
                    """)
        }
        let payload = IngestPayload(
            body: Data(IAdPayloads.attributed(user: "full").utf8), receivedAt: Date(), path: "/v1/iad")
        let provider = try #require(gateway.providers.first { $0.name == "iad" })
        let outcome = try #require(try await gateway.pipeline.accept(payload, provider: provider).first)
        let queued = try await gateway.sqlite!.pool.read { db in
            try String.fetchAll(db, sql: "SELECT record_id FROM outbox WHERE sink = 'local'")
        }
        #expect(queued == [outcome.recordID])
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            #expect(metrics.contains(#"gateway_deliveries_total{sink="local",outcome="inline_fallback"} 1"#))
        }
    }
}
