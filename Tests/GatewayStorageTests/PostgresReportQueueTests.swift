import Foundation
import GatewayCore
@testable import GatewayPostgres
import GatewayTestSupport
import PostgresNIO
import Testing

/// An import queues every record it writes for the report index. Once the index has taken
/// them, the queue must not keep the import's disk for good.
@Suite struct PostgresReportQueueTests {
    static func queueIndexBytes(_ url: PostgresURL) async throws -> Int64 {
        try await TestPostgres.withClient(url) { client in
            for try await size in try await client.query("SELECT pg_relation_size('report_queue_pkey')").decode(
                Int64.self)
            {
                return size
            }
            return 0
        }
    }

    @Test(.enabled(if: TestPostgres.expected))
    func aDrainedQueueGivesItsIndexPagesBackAndStillQueues() async throws {
        let url = try await TestPostgres.newDatabase()
        let store = try await PostgresStore(url: url, poolSize: 2)
        // Entries of records since deleted, as retention queues them: each is taken and
        // indexes nothing, which keeps the test to the queue.
        try await TestPostgres.withClient(url) { client in
            _ = try await client.query("INSERT INTO report_queue (seq) SELECT g FROM generate_series(1, 100000) g")
        }
        let filled = try await Self.queueIndexBytes(url)
        #expect(filled > PostgresStore.releasedQueueIndexBytes)

        while try await store.indexReport(limit: 20_000) != nil {}
        #expect(try await store.reportIndexQueue().waiting == 0)
        #expect(try await Self.queueIndexBytes(url) < filled / 10)

        var record = AttributionRecord(
            provider: "iad", kind: .install, dedupeKey: "iad:k-1",
            receivedAt: Date(timeIntervalSince1970: 1_700_000_000),
            attributed: true)
        record.appID = "1234567890"
        _ = try await store.ingest([RoutedRecord(record: record, sinks: [])])
        #expect(try await store.reportIndexQueue().waiting == 1)
        #expect(try await store.indexReport(limit: 10)?.taken == 1)
    }
}
