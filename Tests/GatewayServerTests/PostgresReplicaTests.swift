import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import GatewayCore
import GatewayTestSupport
import Logging
import PostgresNIO
import Testing

/// `serve` processes on one PostgreSQL database, as replicas behind a load balancer run.
/// Under CI a missing server fails these; elsewhere they run when `scripts/with-postgres`
/// started one.
@Suite struct PostgresReplicaTests {
    static let servers: [String] = TestPostgres.expected ? ["postgres"] : []

    /// Replicas of one config, on the same database, each on its own port, waiting
    /// `timeoutMs` for the database.
    static func startReplicas(
        _ count: Int, env: TestEnvironment, database: PostgresURL, timeoutMs: Int = TestPostgres.timeoutMs
    ) async throws -> [GatewayProcess] {
        var replicas: [GatewayProcess] = []
        for index in 0..<count {
            let config = env.directory.appendingPathComponent("replica-\(index).yaml").path
            try """
            server: { host: 127.0.0.1, port: 0, max_body_bytes: 65536, log_level: info }
            storage: { postgres: { url: "\(database)", pool_size: 4, lease_s: 5, timeout_ms: \(timeoutMs) } }
            providers:
              iad: { enabled: true }
            sinks:
              table: { type: postgres, backoff_initial_ms: 10, backoff_max_ms: 100 }
            routes:
              - sinks: [table]
            """.write(toFile: config, atomically: true, encoding: .utf8)
            let replica = try GatewayProcess(
                config: config, logURL: env.directory.appendingPathComponent("replica-\(index).log"))
            try await replica.start()
            replicas.append(replica)
        }
        return replicas
    }

    static let logger = Logger(label: "test")

    static func install(_ user: String) -> String {
        """
        {"app_id": "1234567890", "app_user_id": "\(user)", "Version3.1": {"iad-attribution": "true",
         "iad-campaign-id": "542370539", "iad-keyword": "meditation app",
         "iad-click-date": "2020-08-04T17:18:07Z", "iad-conversion-date": "2020-08-04T17:19:41Z"}}
        """
    }

    static func count(_ sql: String, in database: PostgresURL) async throws -> Int64 {
        try await TestPostgres.withClient(database) { client in
            for try await count in try await client.query(PostgresQuery(unsafeSQL: sql)).decode(Int64.self) {
                return count
            }
            return -1
        }
    }

    /// POSTs to the gateway on `port`: the status and the JSON answer.
    static func post(port: Int, _ body: String) async throws -> (Int, [String: Any]) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/v1/iad")!)
        request.httpMethod = "POST"
        request.httpBody = Data(body.utf8)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        let (data, response) = try await URLSession.shared.data(for: request)
        let json = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, json)
    }

    @Test(arguments: servers)
    func theSamePayloadAtTwoReplicasAtOnceIsStoredOnceAndBothAnswersNameIt(server: String) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let database = try await TestPostgres.newDatabase()
        let replicas = try await Self.startReplicas(2, env: env, database: database)
        let ports = replicas.map(\.port)
        for round in 0..<20 {
            let body = Self.install("user-\(round)")
            async let first = Self.post(port: ports[0], body)
            async let second = Self.post(port: ports[1], body)
            let answers = try await [first, second]
            #expect(answers.map(\.0).sorted() == [200, 202], "round \(round): \(answers.map(\.1))")
            let ids = answers.compactMap { $0.1["record_id"] as? String }
            #expect(ids.count == 2 && ids[0] == ids[1])
        }
        #expect(try await Self.count("SELECT count(*) FROM records", in: database) == 20)
        // Each record reaches the sink's table once, whichever replica's worker took it.
        #expect(
            try await env.eventually {
                let rows = try await Self.count("SELECT count(*) FROM attribution_records", in: database)
                let waiting = try await Self.count("SELECT count(*) FROM outbox", in: database)
                return rows == 20 && waiting == 0
            })
        for replica in replicas { #expect(try await replica.stop(SIGTERM)) }
    }

    @Test(arguments: servers)
    func whileTheDatabaseIsUnreachableReadinessFailsAndIngestAnswers503StoringNothing(server: String) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let database = try await TestPostgres.newDatabase()
        // The default wait: a request gives up on the database after 10 s.
        let replica = try await Self.startReplicas(1, env: env, database: database, timeoutMs: 10_000)[0]
        #expect(try await replica.post("/v1/iad", body: Self.install("before")).0 == 202)

        let name = try #require(database.database)
        try await TestPostgres.administer("ALTER DATABASE \(name) ALLOW_CONNECTIONS false")
        try await TestPostgres.administer(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(name)'")
        #expect(try await env.eventually { try await replica.get("/readyz").0 == 503 })
        let (status, answer) = try await replica.post("/v1/iad", body: Self.install("during"))
        #expect(status == 503)
        #expect((answer["error"] as? [String: Any])?["code"] as? String == "storage_unavailable")

        try await TestPostgres.administer("ALTER DATABASE \(name) ALLOW_CONNECTIONS true")
        #expect(try await env.eventually { try await replica.get("/readyz").0 == 200 })
        #expect(try await replica.post("/v1/iad", body: Self.install("after")).0 == 202)
        let users = try await TestPostgres.withClient(database) { client in
            var users: [String] = []
            for try await user in try await client.query("SELECT gateway_record(r) ->> 'app_user_id' FROM records r")
                .decode(String.self)
            {
                users.append(user)
            }
            return users.sorted()
        }
        #expect(users == ["after", "before"])
        #expect(try await replica.stop(SIGTERM))
    }

    /// A replica of one `postgres` sink that names the database itself, so that its
    /// statements wait the default 10 s, not the store's (longer) test timeout; a stop
    /// cancels what is still running after a second.
    static func sinkReplica(
        _ name: String, env: TestEnvironment, database: PostgresURL, leaseSeconds: Int
    ) async throws -> GatewayProcess {
        let config = env.directory.appendingPathComponent("\(name).yaml").path
        try """
        server: { host: 127.0.0.1, port: 0, log_level: info, shutdown_timeout_s: 1 }
        storage: { postgres: { url: "\(database)", lease_s: \(leaseSeconds), timeout_ms: \(TestPostgres.timeoutMs) } }
        providers: { iad: { enabled: true } }
        sinks:
          table: { type: postgres, url: "\(database)", backoff_initial_ms: 10, backoff_max_ms: 100 }
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let gateway = try GatewayProcess(config: config, logURL: env.directory.appendingPathComponent("\(name).log"))
        try await gateway.start()
        return gateway
    }

    /// Holds `table` as an operator's migration would (`ACCESS EXCLUSIVE`, in a transaction
    /// of its own) from when this returns until `release` is called; `held` ends with it.
    static func lock(
        _ table: String, in database: PostgresURL
    ) async throws -> (release: @Sendable () -> Void, held: Task<Void, Error>) {
        let (locked, sayLocked) = AsyncStream.makeStream(of: Void.self)
        let (released, release) = AsyncStream.makeStream(of: Void.self)
        let held = Task {
            try await TestPostgres.withClient(database) { client in
                try await client.withConnection { connection in
                    _ = try await connection.query(PostgresQuery(unsafeSQL: "BEGIN"), logger: Self.logger)
                    _ = try await connection.query(
                        PostgresQuery(unsafeSQL: "LOCK TABLE \(table) IN ACCESS EXCLUSIVE MODE"), logger: Self.logger)
                    sayLocked.finish()
                    for await _ in released {}
                    _ = try await connection.query(PostgresQuery(unsafeSQL: "ROLLBACK"), logger: Self.logger)
                }
            }
        }
        for await _ in locked {}
        return ({ release.finish() }, held)
    }

    /// Whether the sink's table holds one record and no outbox row waits: delivered once.
    static func deliveredOnce(in database: PostgresURL) async throws -> Bool {
        let rows = try await count("SELECT count(*) FROM attribution_records", in: database)
        let waiting = try await count("SELECT count(*) FROM outbox", in: database)
        return rows == 1 && waiting == 0
    }

    /// A sink's statement the database holds (here behind a lock an operator's migration
    /// took) is given up at the sink's timeout and retried, and a shutdown does not wait for
    /// it: before, the worker waited for the answer, and SIGTERM for the worker, for good.
    @Test(arguments: servers)
    func aSinkStatementTheDatabaseHoldsIsGivenUpAndShutdownDoesNotWaitForIt(server: String) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let database = try await TestPostgres.newDatabase()
        let held = try await Self.sinkReplica("held", env: env, database: database, leaseSeconds: 5)
        let lock = try await Self.lock("attribution_records", in: database)
        defer {
            lock.release()
            lock.held.cancel()
        }

        #expect(try await held.post("/v1/iad", body: Self.install("held")).0 == 202)
        #expect(
            try await env.eventually(seconds: 120) {
                try await Self.count("SELECT count(*) FROM outbox WHERE attempts > 0", in: database) == 1
            }, "the worker never gave up on the held statement")
        #expect(try await held.stop(SIGTERM), "shutdown waited for the held statement")

        lock.release()
        try await lock.held.value
        let next = try await Self.sinkReplica("next", env: env, database: database, leaseSeconds: 5)
        #expect(try await env.eventually { try await Self.deliveredOnce(in: database) })
        #expect(try await next.stop(SIGTERM))
    }

    /// A replica stopped while its sink waits gives the batch back: the next replica sends it
    /// at once, not when the stopped one's lease (ten minutes here) would have ended.
    @Test(arguments: servers)
    func aReplicaThatStopsGivesBackTheBatchItCutShort(server: String) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let database = try await TestPostgres.newDatabase()
        let stopping = try await Self.sinkReplica("stopping", env: env, database: database, leaseSeconds: 600)
        let lock = try await Self.lock("attribution_records", in: database)
        defer {
            lock.release()
            lock.held.cancel()
        }

        #expect(try await stopping.post("/v1/iad", body: Self.install("cut-short")).0 == 202)
        let name = try #require(database.database)
        #expect(
            try await env.eventually {
                let waiting = try await Self.count(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = '\(name)' AND wait_event_type = 'Lock'",
                    in: database)
                return waiting > 0
            }, "the sink's statement never reached the lock")
        #expect(try await stopping.stop(SIGTERM))
        #expect(
            try await Self.count(
                "SELECT count(*) FROM outbox WHERE next_attempt_at <= extract(epoch FROM clock_timestamp())",
                in: database) == 1, "the stopped replica kept its lease on the batch")

        lock.release()
        try await lock.held.value
        let next = try await Self.sinkReplica("next", env: env, database: database, leaseSeconds: 600)
        #expect(try await env.eventually { try await Self.deliveredOnce(in: database) })
        #expect(try await next.stop(SIGTERM))
    }
}
