import Foundation
import GatewayCore
import GatewaySinks
import GatewayTestSupport
import Logging
import PostgresNIO
import Testing

/// The `postgres` sink against a real server: the SQLite sink's table, with PostgreSQL's
/// types, one row per record however often it is delivered.
@Suite struct PostgresSinkTests {
    static func purchase(user: String) -> AttributionRecord {
        var record = AttributionRecord(
            provider: "s2s", kind: .purchase, dedupeKey: "s2s:1:purchase:\(user)",
            receivedAt: Date(timeIntervalSince1970: 1_800_000_000), attributed: true)
        record.appID = "1"
        record.appUserID = user
        record.revenue = Decimal(string: "9.99")
        record.currency = "USD"
        record.keyword = "meditation app"
        record.raw = .object(["event": .string("purchase")])
        return record
    }

    @Test(arguments: StoreBackend.shared)
    func recordsLandAsTypedRowsOncePerRecordId(backend: StoreBackend) async throws {
        let url = try await TestPostgres.newDatabase()
        let sink = try await PostgresSink(url: url, indexes: ["app_id"], logger: Logger(label: "test"))
        var record = Self.purchase(user: "u1")
        #expect(try await sink.deliver([record, Self.purchase(user: "u2")]) == [.delivered, .delivered])
        // Delivered again, as after a crash, and then as a late version: still one row.
        record.campaignName = "Spring"
        #expect(try await sink.deliver([record]) == [.delivered])
        let rows = try await TestPostgres.withClient(url) { client in
            var rows: [(String, Decimal, Bool, Date, String, String?)] = []
            for try await row in try await client.query(
                """
                SELECT app_user_id, revenue, attributed, received_at, raw ->> 'event', campaign_name
                FROM attribution_records ORDER BY app_user_id
                """
            ).decode((String, Decimal, Bool, Date, String, String?).self) {
                rows.append(row)
            }
            return rows
        }
        #expect(rows.count == 2)
        #expect(rows.first?.0 == "u1")
        #expect(rows.first?.1 == Decimal(string: "9.99"))
        #expect(rows.first?.2 == true)
        #expect(rows.first?.3 == Date(timeIntervalSince1970: 1_800_000_000))
        #expect(rows.first?.4 == "purchase")
        #expect(rows.first?.5 == "Spring")
        await sink.shutdown()
    }

    /// A sink whose database does not answer (here its setup waits for a lock another
    /// session holds) is still made within the timeout, so a start or a reload goes on:
    /// its batches fail, to be retried, until the database answers, and then the rows land.
    @Test(.timeLimit(.minutes(2)), arguments: StoreBackend.shared)
    func aSinkWhoseDatabaseDoesNotAnswerIsMadeAndWritesOnceItDoes(backend: StoreBackend) async throws {
        let url = try await TestPostgres.newDatabase()
        let held = AsyncStream<Void>.makeStream()
        let locked = AsyncStream<Void>.makeStream()
        let holder = Task {
            try await TestPostgres.withClient(url) { client in
                try await client.withConnection { connection in
                    let lock = Int64(0x4154_5452_4757_0002)
                    _ = try await connection.query("SELECT pg_advisory_lock(\(lock))", logger: Logger(label: "test"))
                    locked.continuation.yield()
                    for await _ in held.stream { break }
                    _ = try await connection.query("SELECT pg_advisory_unlock(\(lock))", logger: Logger(label: "test"))
                }
            }
        }
        for await _ in locked.stream { break }
        // Long enough for a loaded machine to connect and write within it once unlocked.
        var sinkURL = url
        sinkURL.timeout = .seconds(10)
        let sink = try await PostgresSink(url: sinkURL, indexes: ["app_id"], logger: Logger(label: "test"))
        await #expect(throws: (any Error).self) { _ = try await sink.deliver([Self.purchase(user: "u1")]) }
        held.continuation.yield()
        try await holder.value
        // Retried as the sink's worker does, each try waiting the time the URL allows.
        var delivered: [DeliveryOutcome]?
        while delivered == nil {
            delivered = try? await sink.deliver([Self.purchase(user: "u1")])
        }
        #expect(delivered == [.delivered])
        await sink.shutdown()
    }

    /// A database nobody answers at: the sink is still made, and the reason its batches
    /// fail (logged by the worker, kept with a dead letter) names the database and the cause,
    /// not PostgresNIO's placeholder.
    @Test(.timeLimit(.minutes(1)), arguments: StoreBackend.shared)
    func aDatabaseNobodyAnswersAtIsNamedWithItsCause(backend: StoreBackend) async throws {
        var url = try PostgresURL("postgres://gateway@127.0.0.1:1/nowhere")
        url.timeout = .seconds(2)
        let sink = try await PostgresSink(url: url, indexes: [], logger: Logger(label: "test"))
        do {
            _ = try await sink.deliver([Self.purchase(user: "u1")])
            Issue.record("delivered to a closed port")
        } catch {
            #expect("\(error)".contains("127.0.0.1:1") && !"\(error)".contains("Generic description"), "\(error)")
        }
        await sink.shutdown()
    }

    /// With `raw: false` the row has every field but the payload, which the store keeps.
    @Test(arguments: StoreBackend.shared)
    func withoutRawTheRowLeavesThePayloadOut(backend: StoreBackend) async throws {
        let url = try await TestPostgres.newDatabase()
        let sink = try await PostgresSink(url: url, indexes: [], raw: false, logger: Logger(label: "test"))
        #expect(
            try await sink.deliver([Self.purchase(user: "u1"), Self.purchase(user: "u2")]) == [.delivered, .delivered])
        let rows = try await TestPostgres.withClient(url) { client in
            var rows: [(String, String?, String?)] = []
            for try await row in try await client.query(
                "SELECT app_user_id, keyword, raw::text FROM attribution_records ORDER BY app_user_id"
            ).decode((String, String?, String?).self) {
                rows.append(row)
            }
            return rows
        }
        #expect(rows.map(\.0) == ["u1", "u2"])
        #expect(rows.map(\.1) == ["meditation app", "meditation app"])
        #expect(rows.map(\.2) == [nil, nil])
        await sink.shutdown()
    }

    /// Only `received_at` by default; the sink's own indexes on columns no longer listed are
    /// dropped at the next start, and an operator's under another name stays.
    @Test(arguments: StoreBackend.shared)
    func theSinksIndexesAreThoseListed(backend: StoreBackend) async throws {
        let url = try await TestPostgres.newDatabase()
        func indexes() async throws -> Set<String> {
            try await TestPostgres.withClient(url) { client in
                var names: Set<String> = []
                for try await name in try await client.query(
                    "SELECT indexname::text FROM pg_indexes WHERE tablename = 'attribution_records'"
                ).decode(String.self) {
                    names.insert(name)
                }
                return names
            }
        }
        let first = try await PostgresSink(url: url, indexes: ["app_id", "app_user_id"], logger: Logger(label: "test"))
        await first.shutdown()
        try await TestPostgres.withClient(url) { client in
            try await client.query("CREATE INDEX by_country ON attribution_records (country_or_region)")
        }
        let defaults = try await PostgresSink(
            url: url, indexes: SQLiteSink.defaultIndexes, logger: Logger(label: "test"))
        await defaults.shutdown()
        #expect(try await indexes() == ["attribution_records_pkey", "attribution_records_received_at", "by_country"])
        let listed = try await PostgresSink(url: url, indexes: ["keyword_id"], logger: Logger(label: "test"))
        #expect(try await listed.deliver([Self.purchase(user: "u1")]) == [.delivered])
        await listed.shutdown()
        #expect(try await indexes() == ["attribution_records_pkey", "attribution_records_keyword_id", "by_country"])
    }

    /// A row the database refuses for what it holds cannot succeed later: it is rejected
    /// alone, and the rest of the batch is written.
    @Test(arguments: StoreBackend.shared)
    func aRowTheDatabaseRefusesIsRejectedAlone(backend: StoreBackend) async throws {
        let url = try await TestPostgres.newDatabase()
        let sink = try await PostgresSink(url: url, indexes: [], logger: Logger(label: "test"))
        try await TestPostgres.withClient(url) { client in
            try await client.query("ALTER TABLE attribution_records ADD CONSTRAINT no_bob CHECK (app_user_id <> 'bob')")
        }
        let outcomes = try await sink.deliver([Self.purchase(user: "alice"), Self.purchase(user: "bob")])
        #expect(outcomes.first == .delivered)
        guard case .reject(let reason) = outcomes.last else {
            Issue.record("bob's row was not rejected: \(outcomes)")
            return
        }
        #expect(reason.contains("23514"))
        await sink.shutdown()
    }
}
