import Foundation
import GatewayCore
import GatewayPostgres
import GatewaySinks
import GatewayTestSupport
import Logging
import PostgresNIO
import Testing

/// A `view: true` postgres sink listed with each commit: its records are in the view when
/// the answer is `2xx`, without an outbox row each, and go to its outbox when the list
/// cannot take them.
@Suite struct PostgresInlineListingTests {
    /// Two installs and a purchase for the view and a webhook, another install for the
    /// view alone (written by the one-record path), and a copy of the first install.
    static func batches() -> [[RoutedRecord]] {
        let records = SQLiteViewSinkTests.records()
        var other = records[0]
        other = AttributionRecord(
            provider: "iad", kind: .install, dedupeKey: "iad:1:u2", receivedAt: other.receivedAt, attributed: true)
        other.appID = "1"
        other.appUserID = "u2"
        var copy = records[0]
        copy.recordID = "another-id"
        return [
            records.map { RoutedRecord(record: $0, sinks: ["view", "hook"]) },
            [RoutedRecord(record: other, sinks: ["view"])],
            [RoutedRecord(record: copy, sinks: ["view", "hook"])],
        ]
    }

    static func count(_ sql: String, in url: PostgresURL) async throws -> Int64 {
        try await TestPostgres.withClient(url) { client in
            for try await count in try await client.query(PostgresQuery(unsafeSQL: sql)).decode(Int64.self) {
                return count
            }
            return -1
        }
    }

    /// A store on a new database listing the view sink `view` inline, and what it reports.
    static func listingStore() async throws -> (PostgresURL, PostgresStore, PostgresViewSink, InlineCounts) {
        let url = try await TestPostgres.newDatabase()
        let store = try await PostgresStore(url: url, poolSize: 2, outboxLease: .seconds(60))
        let view = try await PostgresViewSink(url: url, indexes: [], logger: Logger(label: "test"))
        let reported = InlineCounts()
        store.observeInline(reported)
        store.listInline(sink: "view", table: view.listTable)
        return (url, store, view, reported)
    }

    @Test(.enabled(if: TestPostgres.expected)) func listedRecordsAreInTheViewWithoutOutboxRows() async throws {
        let (url, store, view, reported) = try await Self.listingStore()
        #expect(store.inlineSinkNames == ["view"])

        var results: [IngestResult] = []
        for batch in Self.batches() { results += try await store.ingest(batch) }
        #expect(results.filter { if case .duplicate = $0 { true } else { false } }.count == 1)
        #expect(try await Self.count("SELECT count(*) FROM attribution_records", in: url) == 4)
        // The webhook's records wait in its outbox; the view has none there.
        #expect(try await Self.count("SELECT count(*) FROM outbox WHERE sink = 'hook'", in: url) == 3)
        #expect(try await Self.count("SELECT count(*) FROM outbox WHERE sink = 'view'", in: url) == 0)
        #expect(reported.deliveredCounts.withLock { $0 } == ["view": 4])
        #expect(reported.fellBackCounts.withLock { $0 }.isEmpty)

        // Taken off (a reload removed the sink), its records go to its outbox again.
        store.stopDeliveringInline(sink: "view")
        let late = AttributionRecord(
            provider: "s2s", kind: .purchase, dedupeKey: "s2s:1:purchase:8", receivedAt: Date())
        _ = try await store.ingest([RoutedRecord(record: late, sinks: ["view"])])
        #expect(try await Self.count("SELECT count(*) FROM outbox WHERE sink = 'view'", in: url) == 1)
        #expect(try await Self.count("SELECT count(*) FROM attribution_records", in: url) == 4)
        await view.shutdown()
    }

    /// A resolved token's record is listed as it is stored, as a posted one is: the view's
    /// worker is not woken for records the store wrote inline.
    @Test(.enabled(if: TestPostgres.expected)) func aResolvedTokensRecordIsListedAsItIsStored() async throws {
        let (url, store, view, reported) = try await Self.listingStore()
        let now = Date()
        let work = PendingWork(
            provider: "adservices", dedupeKey: "adservices:token:t1", appID: "1", receivedAt: now, state: Data())
        #expect(try await store.addPending(work, now: now) == .accepted(recordID: work.recordID))
        var answered = AttributionRecord(
            provider: "adservices", kind: .install, dedupeKey: work.dedupeKey, receivedAt: now, attributed: true)
        answered.recordID = work.recordID
        answered.appID = "1"
        let results = try await store.settlePending([
            .finished(recordID: work.recordID, records: [RoutedRecord(record: answered, sinks: ["view", "hook"])])
        ])
        #expect(results[work.recordID] == [.stored(recordID: work.recordID)])
        #expect(try await Self.count("SELECT count(*) FROM attribution_records", in: url) == 1)
        #expect(try await Self.count("SELECT count(*) FROM outbox WHERE sink = 'view'", in: url) == 0)
        #expect(try await Self.count("SELECT count(*) FROM outbox WHERE sink = 'hook'", in: url) == 1)
        #expect(reported.deliveredCounts.withLock { $0 } == ["view": 1])
        await view.shutdown()
    }

    /// A list that cannot be written (an operator dropped it) costs the records nothing:
    /// they are stored and wait in the sink's outbox, and the store says so.
    @Test(.enabled(if: TestPostgres.expected)) func aListThatFailsSendsItsRecordsToTheOutbox() async throws {
        let (url, store, view, reported) = try await Self.listingStore()
        try await TestPostgres.withClient(url) { client in
            try await client.query("DROP VIEW attribution_records")
            try await client.query("DROP TABLE attribution_records_rows")
        }
        var results: [IngestResult] = []
        for batch in Self.batches() { results += try await store.ingest(batch) }
        #expect(results.map { if case .duplicate = $0 { true } else { false } } == [false, false, false, false, true])
        #expect(try await Self.count("SELECT count(*) FROM records", in: url) == 4)
        #expect(try await Self.count("SELECT count(*) FROM outbox WHERE sink = 'view'", in: url) == 4)
        #expect(try await Self.count("SELECT count(*) FROM outbox WHERE sink = 'hook'", in: url) == 3)
        #expect(reported.fellBackCounts.withLock { $0 } == ["view": 4])
        #expect(reported.deliveredCounts.withLock { $0 }.isEmpty)
        await view.shutdown()
    }
}
