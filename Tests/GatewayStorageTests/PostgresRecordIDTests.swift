import Foundation
import GatewayCore
@testable import GatewayPostgres
import GatewayTestSupport
import PostgresNIO
import Testing

/// PostgreSQL finds a record by its id through the id as a uuid (`store-v15`): the lookup
/// must use that index, find exactly the id asked for, and a database written before must
/// keep what it had queued.
@Suite struct PostgresRecordIDTests {
    static func record(_ id: String, key: String) -> AttributionRecord {
        var record = AttributionRecord(
            provider: "iad", kind: .install, dedupeKey: key, receivedAt: Date(timeIntervalSince1970: 1_700_000_000),
            attributed: true, recordID: id)
        record.appID = "1234567890"
        record.idfv = "idfv-\(key)"
        return record
    }

    /// Before `store-v15`, the outbox and dead letters named a record by its id; since, by
    /// its `seq`. An id that is not a UUID (one written by hand) is found as well as one that is.
    @Test(.enabled(if: TestPostgres.expected))
    func queuedAndDeadLetteredRecordsKeepTheirPlaceThroughTheUpgradeToSeq() async throws {
        let url = try await TestPostgres.newDatabase()
        let records = [
            Self.record(AttributionRecord.newRecordID(), key: "iad:k-1"), Self.record("by-hand-1", key: "iad:k-2"),
        ]
        let before = PostgresSchema.migrations.prefix { $0.id != "store-v15-record-id-as-uuid" }
        #expect(before.count == PostgresSchema.migrations.count - 1)
        try await TestPostgres.withClient(url) { client in
            _ = try await client.query("CREATE TABLE gateway_migrations (id text PRIMARY KEY, applied_at timestamptz)")
            for migration in before {
                for statement in migration.sql { _ = try await client.query(PostgresQuery(unsafeSQL: statement)) }
                _ = try await client.query("INSERT INTO gateway_migrations (id) VALUES (\(migration.id))")
            }
            for record in records {
                _ = try await client.query(
                    """
                    INSERT INTO records (record_id, dedupe_key, provider, app_id, received_at, body)
                    VALUES (\(record.recordID), \(record.dedupeKey), 'iad', \(record.appID), 1700000000,
                        \(record.encoded(codedKeys: true).text))
                    """)
                _ = try await client.query(
                    """
                    INSERT INTO outbox (sink, record_id, attempts, next_attempt_at, created_at)
                    VALUES ('queued', \(record.recordID), 2, 1700000100, 1700000000)
                    """)
            }
            _ = try await client.query(
                """
                INSERT INTO dead_letters (sink, record_id, attempts, error, failed_at)
                VALUES ('failed', \(records[1].recordID), 5, 'refused', 1700000200)
                """)
        }

        let store = try await PostgresStore(url: url, poolSize: 2)
        let due = try await store.dueEntries(
            sink: "queued", now: Date(timeIntervalSince1970: 1_800_000_000), limit: 10, laneOrdered: false)
        #expect(due.map(\.record.recordID) == records.map(\.recordID))
        #expect(due.map(\.attempts) == [2, 2])
        let letters = try await store.deadLetters(sink: nil, ids: nil, limit: 10)
        #expect(letters.map { "\($0.sink) \($0.recordID) \($0.attempts)" } == ["failed by-hand-1 5"])
        for record in records { #expect(try await store.record(id: record.recordID)?.dedupeKey == record.dedupeKey) }
        #expect(
            try await store.retryDeadLetters(ids: nil, sink: "failed", among: nil, now: Date(timeIntervalSince1970: 0))
                == 1)
        let retried = try await store.dueEntries(
            sink: "failed", now: Date(timeIntervalSince1970: 1_800_000_000), limit: 10, laneOrdered: false)
        #expect(retried.map(\.record.recordID) == ["by-hand-1"])
    }

    /// Without the index a lookup by id reads every record; the planner matches the index
    /// only if the lookup spells the same expression. Ids differing only in case are two
    /// records (only the lowercase form is read as a UUID).
    @Test(.enabled(if: TestPostgres.expected))
    func aRecordIsFoundByItsExactIdThroughTheIndex() async throws {
        let url = try await TestPostgres.newDatabase()
        let store = try await PostgresStore(url: url, poolSize: 2)
        let id = AttributionRecord.newRecordID()
        let records = [
            Self.record(id, key: "iad:k-1"), Self.record(id.uppercased(), key: "iad:k-2"),
            Self.record("by-hand-1", key: "iad:k-3"),
        ]
        _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: []) })
        for record in records { #expect(try await store.record(id: record.recordID)?.dedupeKey == record.dedupeKey) }
        #expect(try await store.record(id: "by-hand-2") == nil)

        let plan = try await TestPostgres.withClient(url) { client in
            try await client.withConnection { connection in
                _ = try await connection.query("SET enable_seqscan = off", logger: connection.logger)
                var lines: [String] = []
                for try await line in try await connection.query(
                    "EXPLAIN SELECT seq FROM gateway_records(ARRAY[\(id)::text, 'by-hand-1'])",
                    logger: connection.logger
                ).decode(String.self) {
                    lines.append(line)
                }
                return lines.joined(separator: "\n")
            }
        }
        #expect(plan.contains("records_record_id"), "\(plan)")
        #expect(!plan.contains("Seq Scan on records"), "\(plan)")
    }
}
