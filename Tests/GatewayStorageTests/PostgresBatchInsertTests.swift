import Foundation
import GatewayCore
import GatewayPostgres
import GatewayTestSupport
import PostgresNIO
import Testing

/// A batch is written by one statement of column arrays; the rows it leaves must be those a
/// statement per record leaves: the same results, the same columns (NULLs included), the
/// same outbox rows in the same order.
@Suite struct PostgresBatchInsertTests {
    static func record(
        _ user: String, key: String? = nil, app: String?, raw: Bool = false, signature: String? = nil,
        idfv: String? = nil
    ) -> AttributionRecord {
        var record = AttributionRecord(
            provider: "iad", kind: .install, dedupeKey: key ?? "iad:\(user)",
            receivedAt: Date(timeIntervalSince1970: 1_700_000_000), attributed: true)
        record.appID = app
        record.appUserID = user
        record.idfv = idfv
        record.signature = signature
        if raw { record.raw = .object(["event": .string("install"), "user": .string(user)]) }
        return record
    }

    /// Records that put a NULL, an empty value and a real one in each nullable column, and
    /// duplicates of an earlier batch, of an earlier record of the same batch, and twice over.
    static func batch() -> (earlier: [RoutedRecord], batch: [RoutedRecord]) {
        let earlier = [RoutedRecord(record: record("u0", app: "1"), sinks: ["a"])]
        let batch = [
            RoutedRecord(record: record("u1", app: nil), sinks: ["a", "b"]),
            RoutedRecord(record: record("u2", app: "", raw: true, signature: "invalid", idfv: "D2"), sinks: ["b"]),
            RoutedRecord(record: record("u0", app: "1"), sinks: ["a"]),
            RoutedRecord(record: record("u3", app: "7", raw: true, idfv: ""), sinks: []),
            RoutedRecord(record: record("u1", app: "9"), sinks: ["a", "c"]),
            RoutedRecord(record: record("u4", app: "7", signature: "unverifiable"), sinks: ["c", "a", "b"]),
            RoutedRecord(record: record("u1", app: nil), sinks: ["b"]),
            RoutedRecord(record: record("u5", key: "caf\u{E9}", app: "7"), sinks: ["a"]),
            RoutedRecord(record: record("u6", key: "cafe\u{301}", app: "7"), sinks: ["a"]),
        ]
        return (earlier, batch)
    }

    /// What the tables hold, row by row in insertion order, without the ids a database counts.
    static func contents(_ url: PostgresURL) async throws -> [String] {
        try await TestPostgres.withClient(url) { client in
            var rows: [String] = []
            let records = try await client.query(
                """
                SELECT record_id, dedupe_key, provider, app_id, received_at, body, encode(raw, 'hex'), quarantined_bytes
                FROM records ORDER BY seq
                """)
            for try await (id, key, provider, app, received, body, raw, bytes) in records.decode(
                (String, String, String, String?, Double, String, String?, Int64?).self)
            {
                rows.append(
                    "record \(id) \(Array(key.utf8)) \(provider) \(app.debugDescription) \(received) \(body) "
                        + "\(raw.debugDescription) \(bytes.debugDescription)")
            }
            let outbox = try await client.query(
                """
                SELECT o.sink, r.record_id, o.attempts, o.next_attempt_at, o.created_at, o.last_error, o.lane,
                    o.position, o.sending_since
                FROM outbox o JOIN records r ON r.seq = o.record_seq ORDER BY o.id
                """)
            for try await (sink, id, attempts, next, created, error, lane, position, sending) in outbox.decode(
                (String, String, Int64, Double, Double, String?, String?, Int64?, Double?).self)
            {
                rows.append(
                    "outbox \(sink) \(id) \(attempts) \(next) \(created) \(error.debugDescription) "
                        + "\(lane.debugDescription) \(position.debugDescription) \(sending.debugDescription)")
            }
            return rows
        }
    }

    @Test(.enabled(if: TestPostgres.expected))
    func aBatchLeavesTheRowsAndResultsOfOneStatementPerRecord() async throws {
        let queuedAt = Date(timeIntervalSince1970: 1_800_000_000)
        let (earlier, batch) = Self.batch()
        let together = try await TestPostgres.newDatabase()
        let oneByOne = try await TestPostgres.newDatabase()
        let batchStore = try await PostgresStore(url: together, poolSize: 2, now: { queuedAt })
        let singleStore = try await PostgresStore(url: oneByOne, poolSize: 2, now: { queuedAt })

        #expect(try await batchStore.ingest(earlier) == [.stored(recordID: earlier[0].record.recordID)])
        _ = try await singleStore.ingest(earlier)
        let results = try await batchStore.ingest(batch)
        var expected: [IngestResult] = []
        for item in batch { expected += try await singleStore.ingest([item]) }

        let ids = batch.map(\.record.recordID)
        #expect(
            results == [
                .stored(recordID: ids[0]), .stored(recordID: ids[1]), .duplicate(of: earlier[0].record.recordID),
                .stored(recordID: ids[3]), .duplicate(of: ids[0]), .stored(recordID: ids[5]), .duplicate(of: ids[0]),
                .stored(recordID: ids[7]), .stored(recordID: ids[8]),
            ])
        #expect(results == expected)
        let rows = try await Self.contents(together)
        #expect(rows == (try await Self.contents(oneByOne)))
        // The batch did put NULLs and values, empty ones too, in each nullable column.
        let counts = try await TestPostgres.withClient(together) { client in
            let rows = try await client.query(
                """
                SELECT count(*) FILTER (WHERE app_id IS NULL), count(*) FILTER (WHERE app_id = ''),
                    count(*) FILTER (WHERE raw IS NULL), count(*) FILTER (WHERE raw IS NOT NULL),
                    count(*) FILTER (WHERE quarantined_bytes IS NULL), count(*) FILTER (WHERE quarantined_bytes > 0),
                    (SELECT count(*) FILTER (WHERE lane IS NULL) FROM outbox),
                    (SELECT count(*) FILTER (WHERE lane IS NOT NULL) FROM outbox),
                    (SELECT count(*) FROM outbox)
                FROM records
                """)
            var counts: [Int64] = []
            for try await row in rows.decode((Int64, Int64, Int64, Int64, Int64, Int64, Int64, Int64, Int64).self) {
                counts = [row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8]
            }
            return counts
        }
        #expect(counts.count == 9 && counts.prefix(8).allSatisfy { $0 > 0 }, "\(counts)")
        // One row per sink of each stored record: u0 1, u1 2, u2 1, u3 0, u4 3, u5 1, u6 1.
        #expect(counts.last == Int64(9))
    }

    /// A batch of copies only stores nothing and queues nothing; a batch of nothing but new
    /// records names each.
    @Test(.enabled(if: TestPostgres.expected))
    func aBatchOfCopiesOnlyStoresNothing() async throws {
        let store = try await PostgresStore(url: try await TestPostgres.newDatabase(), poolSize: 2)
        let first = [
            RoutedRecord(record: Self.record("u1", app: "1"), sinks: ["a"]),
            RoutedRecord(record: Self.record("u2", app: "1"), sinks: ["a"]),
        ]
        #expect(try await store.ingest(first) == first.map { .stored(recordID: $0.record.recordID) })
        let copies = [
            RoutedRecord(record: Self.record("u2", app: "1"), sinks: ["a"]),
            RoutedRecord(record: Self.record("u1", app: "1"), sinks: ["b"]),
        ]
        #expect(
            try await store.ingest(copies) == [
                .duplicate(of: first[1].record.recordID), .duplicate(of: first[0].record.recordID),
            ])
        #expect(try await store.outboxStats()["a"]?.depth == 2)
        #expect(try await store.outboxStats()["b"] == nil)
    }
}
