import Foundation
import GatewayCore
import GatewayPostgres
import GatewaySinks
import GatewayTestSupport
import Logging
import PostgresNIO
import Testing

/// `type: postgres` with `view: true` against a real server: the view over the store's
/// records holds what the table of the same records would, with the same types.
@Suite struct PostgresViewSinkTests {
    /// The one text column `sql` reads in `url`, NULL as nil.
    static func texts(_ sql: String, in url: PostgresURL) async throws -> [String?] {
        try await TestPostgres.withClient(url) { client in
            var texts: [String?] = []
            for try await text in try await client.query(PostgresQuery(unsafeSQL: sql)).decode(String?.self) {
                texts.append(text)
            }
            return texts
        }
    }

    /// Each column's type, then each row as JSON without `raw`, in `url`'s `attribution_records`.
    func contents(_ url: PostgresURL) async throws -> (types: [String?], rows: [String?]) {
        let types = try await Self.texts(
            """
            SELECT column_name::text || ' ' || data_type::text FROM information_schema.columns
            WHERE table_name = 'attribution_records' ORDER BY ordinal_position
            """, in: url)
        let rows = try await Self.texts(
            "SELECT (to_jsonb(t) - 'raw')::text FROM attribution_records t ORDER BY received_at", in: url)
        return (types, rows)
    }

    /// A store on a new database holding ``SQLiteViewSinkTests/records()``, delivered to no
    /// sink yet, and a view sink on it.
    static func storedRecords() async throws -> (PostgresURL, PostgresStore, [AttributionRecord], PostgresViewSink) {
        let url = try await TestPostgres.newDatabase()
        let store = try await PostgresStore(url: url, poolSize: 2, outboxLease: .seconds(60))
        let records = SQLiteViewSinkTests.records()
        _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: []) })
        let view = try await PostgresViewSink(url: url, indexes: [], logger: Logger(label: "test"))
        return (url, store, records, view)
    }

    @Test(.enabled(if: TestPostgres.expected)) func theViewHoldsWhatTheTableWouldHold() async throws {
        let url = try await TestPostgres.newDatabase()
        let store = try await PostgresStore(url: url, poolSize: 2, outboxLease: .seconds(60))
        let records = SQLiteViewSinkTests.records()
        _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: ["local"]) })
        var stored: [AttributionRecord] = []
        for record in records { stored.append(try #require(try await store.record(id: record.recordID))) }

        let view = try await PostgresViewSink(
            url: url, indexes: ["app_user_id", "received_at", "revenue"], logger: Logger(label: "test"))
        #expect(try await view.deliver(stored) == [.delivered, .delivered, .delivered])
        let tableURL = try await TestPostgres.newDatabase()
        let table = try await PostgresSink(url: tableURL, indexes: [], logger: Logger(label: "test"))
        #expect(try await table.deliver(stored) == [.delivered, .delivered, .delivered])

        let fromView = try await contents(url)
        let fromTable = try await contents(tableURL)
        #expect(fromView.rows.count == 3)
        #expect(fromView.types == fromTable.types)
        #expect(fromView.rows == fromTable.rows)

        // A forget request takes the user's records out; the postback names no user.
        _ = try await store.forget(
            ForgetSubject(appID: "1", appUserID: "u1"), requestID: "r1", userDigest: "d", sinks: ["local"], now: Date())
        let request = try #require(try await store.forgetRequest(id: "r1", sink: "local"))
        #expect(try await view.forget(request) == .done)
        #expect(try await Self.texts("SELECT dedupe_key FROM attribution_records", in: url) == ["skan:tx-1:0"])

        // A listed field is an index on the records, which a query of the view uses.
        func plan(_ condition: String) async throws -> String {
            try await TestPostgres.withClient(url) { client in
                try await client.query("SET enable_seqscan = off")
                var lines: [String] = []
                for try await line in try await client.query(
                    PostgresQuery(unsafeSQL: "EXPLAIN SELECT keyword FROM attribution_records WHERE \(condition)")
                ).decode(String.self) {
                    lines.append(line)
                }
                return lines.joined(separator: "\n")
            }
        }
        #expect(try await plan("app_user_id = 'u1'").contains("attribution_records_app_user_id"))
        #expect(
            try await plan("received_at > '2027-01-15T08:00:01Z'").contains("attribution_records_received_at"))
        await view.shutdown()
        await table.shutdown()
    }

    /// A record retention deletes leaves the sink's list too.
    @Test(.enabled(if: TestPostgres.expected)) func aRecordRetentionDeletesLeavesTheList() async throws {
        // Delivered here rather than through the outbox, whose rows retention waits for.
        let (url, store, records, view) = try await Self.storedRecords()
        #expect(try await view.deliver(records) == [.delivered, .delivered, .delivered])
        let cut = records[1].receivedAt.addingTimeInterval(1)
        #expect(try await store.deleteRecords(receivedBefore: cut, limit: 100) == 2)
        let listed = try await Self.texts(
            "SELECT r.dedupe_key FROM attribution_records_rows d LEFT JOIN records r ON r.seq = d.seq", in: url)
        #expect(listed == ["skan:tx-1:0"])
        await view.shutdown()
    }

    /// A record the list refuses (a trigger of the operator's, a constraint) is rejected
    /// alone, as a table sink's row is; the rest of its batch is listed.
    @Test(.enabled(if: TestPostgres.expected)) func aRecordTheListRefusesIsRejectedAlone() async throws {
        let (url, _, records, view) = try await Self.storedRecords()
        try await TestPostgres.withClient(url) { client in
            try await client.query(
                """
                CREATE FUNCTION no_purchases() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF (SELECT provider FROM records WHERE seq = NEW.seq) = 's2s' THEN
                        RAISE EXCEPTION 'no purchases here' USING ERRCODE = '23514';
                    END IF;
                    RETURN NEW;
                END $$
                """)
            try await client.query(
                "CREATE TRIGGER no_purchases BEFORE INSERT ON attribution_records_rows FOR EACH ROW EXECUTE FUNCTION no_purchases()"
            )
        }
        let outcomes = try await view.deliver(records)
        #expect(outcomes[0] == .delivered && outcomes[2] == .delivered)
        guard case .reject(let reason) = outcomes[1] else {
            Issue.record("the purchase was not rejected: \(outcomes[1])")
            return
        }
        #expect(reason.contains("23514") && reason.contains("no purchases here"))
        let listed = try await Self.texts("SELECT dedupe_key FROM attribution_records ORDER BY 1", in: url)
        #expect(listed == ["iad:1:u1", "skan:tx-1:0"])
        await view.shutdown()
    }

    /// A start keeps the view an operator has given grants on and made views of, and takes
    /// no lock that would wait for a transaction reading it; a newer definition replaces it
    /// in place, keeping both.
    @Test(.enabled(if: TestPostgres.expected)) func aStartKeepsTheViewItsReadersUse() async throws {
        let url = try await TestPostgres.newDatabase()
        _ = try await PostgresStore(url: url, poolSize: 2, outboxLease: .seconds(60))
        let first = try await PostgresViewSink(url: url, indexes: ["app_user_id"], logger: Logger(label: "test"))
        await first.shutdown()
        let role = "analyst_" + UUID().uuidString.prefix(8).lowercased()
        func check(_ sql: String) async throws -> Bool {
            try await TestPostgres.withClient(url) { client in
                for try await value in try await client.query(PostgresQuery(unsafeSQL: sql)).decode(Bool.self) {
                    return value
                }
                return false
            }
        }
        try await TestPostgres.withClient(url) { client in
            for statement in [
                "CREATE ROLE \(role)", "GRANT SELECT ON attribution_records TO \(role)",
                "CREATE VIEW installs_by_keyword AS SELECT keyword, count(*) FROM attribution_records GROUP BY keyword",
                // As an older version would have left it.
                "COMMENT ON VIEW attribution_records IS 'older'",
                // A start that would wait for a lock fails instead of hanging the test.
                "ALTER DATABASE \(url.database ?? "") SET lock_timeout = '2s'",
            ] {
                try await client.query(PostgresQuery(unsafeSQL: statement))
            }
        }
        let replaced = try await PostgresViewSink(url: url, indexes: ["app_user_id"], logger: Logger(label: "test"))
        await replaced.shutdown()
        #expect(try await check("SELECT has_table_privilege('\(role)', 'attribution_records', 'SELECT')"))
        #expect(try await check("SELECT obj_description('attribution_records'::regclass, 'pg_class') <> 'older'"))

        // A reader's open transaction holds the view; the next start goes on beside it.
        let logger = Logger(label: "test")
        try await TestPostgres.withClient(url) { client in
            try await client.withConnection { reader in
                try await reader.query("BEGIN", logger: logger)
                try await reader.query("SELECT count(*) FROM installs_by_keyword", logger: logger)
                let again = try await PostgresViewSink(url: url, indexes: ["app_user_id"], logger: logger)
                await again.shutdown()
                try await reader.query("COMMIT", logger: logger)
            }
        }
        #expect(try await check("SELECT has_table_privilege('\(role)', 'attribution_records', 'SELECT')"))
        try await TestPostgres.withClient(url) { client in
            try await client.query(PostgresQuery(unsafeSQL: "DROP OWNED BY \(role)"))
            try await client.query(PostgresQuery(unsafeSQL: "DROP ROLE \(role)"))
        }
    }

    /// An index the view's queries would not use, as one of an expression an earlier version
    /// read, is built again; one of the expression the view reads is kept as it is.
    @Test(.enabled(if: TestPostgres.expected)) func aStartRebuildsAnIndexOfAnotherExpression() async throws {
        let url = try await TestPostgres.newDatabase()
        _ = try await PostgresStore(url: url, poolSize: 2, outboxLease: .seconds(60))
        func start() async throws {
            let view = try await PostgresViewSink(
                url: url, indexes: ["keyword", "app_user_id"], logger: Logger(label: "test"))
            await view.shutdown()
        }
        func definitions() async throws -> [String?] {
            try await Self.texts(
                """
                SELECT indexrelid::text || ' ' || pg_get_indexdef(indexrelid) FROM pg_index
                WHERE indrelid = 'records'::regclass
                    AND indexrelid::regclass::text IN ('attribution_records_keyword', 'attribution_records_app_user_id')
                ORDER BY indexrelid::regclass::text DESC
                """, in: url)
        }
        try await start()
        let first = try await definitions()
        try await start()
        #expect(try await definitions() == first)
        try await TestPostgres.withClient(url) { client in
            for statement in [
                "DROP INDEX attribution_records_keyword",
                "CREATE INDEX attribution_records_keyword ON records ((gateway_json(body) ->> 'keyword'))",
            ] {
                try await client.query(PostgresQuery(unsafeSQL: statement))
            }
        }
        try await start()
        let rebuilt = try await definitions()
        #expect(rebuilt.count == 2 && rebuilt[0] != first[0] && rebuilt[1] == first[1])
        #expect(rebuilt[0]?.contains("'\(StoredKey.code(of: "keyword"))'") == true, "\(rebuilt)")
    }

    /// Turned back into a table, the sink's indexes are the table's, not the view's on
    /// `records` under the same names.
    @Test(.enabled(if: TestPostgres.expected)) func aViewTurnedBackIntoATableHasTheTablesIndexes() async throws {
        let url = try await TestPostgres.newDatabase()
        _ = try await PostgresStore(url: url, poolSize: 2, outboxLease: .seconds(60))
        let view = try await PostgresViewSink(
            url: url, indexes: ["app_user_id", "received_at"], logger: Logger(label: "test"))
        await view.shutdown()
        try await TestPostgres.withClient(url) { client in try await client.query("DROP VIEW attribution_records") }
        let table = try await PostgresSink(url: url, indexes: ["app_user_id"], logger: Logger(label: "test"))
        await table.shutdown()
        let indexes = try await TestPostgres.withClient(url) { client in
            var found: [String] = []
            for try await line in try await client.query(
                """
                SELECT indexname || ' on ' || tablename FROM pg_indexes
                WHERE indexname LIKE 'attribution\\_records\\_%' AND indexname NOT LIKE '%pkey' ORDER BY 1
                """
            ).decode(String.self) {
                found.append(line)
            }
            return found
        }
        #expect(indexes == ["attribution_records_app_user_id on attribution_records"])
    }

    /// A table and a view cannot share the name: the sink that would lose rows, or find a
    /// view where it writes, refuses to start and says why.
    @Test(.enabled(if: TestPostgres.expected)) func aViewAndATableInOneDatabaseRefuseToStart() async throws {
        let url = try await TestPostgres.newDatabase()
        _ = try await PostgresStore(url: url, poolSize: 2, outboxLease: .seconds(60))
        let table = try await PostgresSink(url: url, indexes: [], logger: Logger(label: "test"))
        await table.shutdown()
        await SQLiteViewSinkTests.expectRefusal("attribution_records is a table here") {
            _ = try await PostgresViewSink(url: url, indexes: [], logger: Logger(label: "test"))
        }
        let other = try await TestPostgres.newDatabase()
        _ = try await PostgresStore(url: other, poolSize: 2, outboxLease: .seconds(60))
        let view = try await PostgresViewSink(url: other, indexes: [], logger: Logger(label: "test"))
        await view.shutdown()
        await SQLiteViewSinkTests.expectRefusal("attribution_records is a view here") {
            _ = try await PostgresSink(url: other, indexes: [], logger: Logger(label: "test"))
        }
    }
}
