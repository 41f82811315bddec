import Crypto
import Foundation
import GatewayConfig
import GatewayCore
import GatewayServer
import GatewaySinks
import GRDB
import Hummingbird
import HummingbirdTesting
import GatewayTestSupport
import PostgresNIO
import Testing

/// `POST /v1/users/forget` through the real server and SQLite file, with a webhook
/// receiver, a Mixpanel and an exec plugin that check what they get as the real ones do.
/// Waits are bounds for work to finish, never speed claims.
@Suite struct ForgetEndToEndTests {
    static let appID = "1234567890"
    static let appKey = "app-key-0123456789abcdef"
    static let backendKey = "backend-key-0123456789ab"
    static let otherBackendKey = "other-backend-key-012345"
    static let plugin = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/exec_plugin.py").path

    func yaml(_ env: TestEnvironment, hookPort: Int, mixpanelPort: Int, pluginFile: String) -> String {
        """
        server: { host: 127.0.0.1, port: 0, max_body_bytes: 65536, log_level: warning }
        storage: { sqlite: { path: \(env.databasePath), durability: normal } }
        auth:
          api_keys:
            - { app_id: "\(Self.appID)", key: "\(Self.appKey)" }
            - { app_id: "\(Self.appID)", key: "\(Self.backendKey)", scope: backend }
            - { app_id: "999", key: "\(Self.otherBackendKey)", scope: backend }
        providers:
          iad: { enabled: true }
        sinks:
          local: { type: sqlite, backoff_initial_ms: 10, backoff_max_ms: 100 }
          hook:
            type: webhook
            url: http://127.0.0.1:\(hookPort)/hook
            secret: \(WebhookSinkTests.secret)
            backoff_initial_ms: 10
            backoff_max_ms: 100
            max_attempts: 1000
          mp:
            type: mixpanel
            token: \(MixpanelSinkTests.token)
            endpoint: http://127.0.0.1:\(mixpanelPort)
            backoff_initial_ms: 10
            backoff_max_ms: 100
          plugin:
            type: exec
            command: [python3, \(Self.plugin), \(pluginFile)]
            backoff_initial_ms: 10
            backoff_max_ms: 100
        routes:
          - sinks: [local, hook, mp, plugin]
        """
    }

    func withGateway(
        _ env: TestEnvironment, hook: WebhookSinkTests.Receiver, mixpanel: MixpanelSinkTests.FakeMixpanel,
        pluginFile: String, _ body: @escaping @Sendable (TestClientProtocol) async throws -> Void
    ) async throws {
        let local = ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0))
        try await Application(router: hook.router(), configuration: local).test(.live) { hookClient in
            try await Application(router: mixpanel.router(), configuration: local).test(.live) { mixpanelClient in
                let config = try ConfigLoader.parse(
                    yaml: yaml(
                        env, hookPort: try #require(hookClient.port), mixpanelPort: try #require(mixpanelClient.port),
                        pluginFile: pluginFile),
                    file: "forget.yaml", environment: [:], registry: .builtIn)
                let gateway = try await Gateway.build(configuration: config)
                try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in try await body(client) }
            }
        }
    }

    static func json(_ response: TestResponse) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any])
    }

    static func bearer(_ key: String) -> HTTPFields { [.authorization: "Bearer \(key)"] }

    /// Every byte of the store's files: the database and its write-ahead log.
    static func fileBytes(_ env: TestEnvironment) throws -> Data {
        var bytes = Data()
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: env.databasePath + suffix) {
            bytes.append(try Data(contentsOf: URL(fileURLWithPath: env.databasePath + suffix)))
        }
        return bytes
    }

    @Test func aForgottenUserIsGoneFromTheStoreAndEverySinkIsAskedToDeleteThem() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let hook = WebhookSinkTests.Receiver()
        let mixpanel = MixpanelSinkTests.FakeMixpanel()
        let pluginFile = env.directory.appendingPathComponent("plugin.ndjson").path
        try await withGateway(env, hook: hook, mixpanel: mixpanel, pluginFile: pluginFile) { client in
            for user in ["forget-me-4711", "keep-me-0815"] {
                let response = try await client.execute(
                    uri: "/v1/iad", method: .post, headers: Self.bearer(Self.appKey),
                    body: ByteBuffer(string: IAdPayloads.attributed(user: user)))
                #expect(response.status == .accepted)
            }
            // Delivered everywhere first: the deletions have something to delete.
            #expect(
                try await env.eventually {
                    try env.deliveredRecordIDs().count == 2 && hook.requests.count >= 1
                        && mixpanel.bodies.withLock({ $0.count }) >= 1
                        && ((try? String(contentsOfFile: pluginFile, encoding: .utf8))?.split(separator: "\n").count
                            == 2)
                })
            let hookBefore = hook.requests.count

            // An app's key, which anyone can read out of the app, may not forget anyone.
            let refused = try await client.execute(
                uri: "/v1/users/forget", method: .post, headers: Self.bearer(Self.appKey),
                body: ByteBuffer(string: #"{"app_id":"\#(Self.appID)","app_user_id":"keep-me-0815"}"#))
            #expect(refused.status == .forbidden)
            let unnamed = try await client.execute(
                uri: "/v1/users/forget", method: .post, headers: Self.bearer(Self.backendKey),
                body: ByteBuffer(string: #"{"app_id":"\#(Self.appID)"}"#))
            #expect(unnamed.status == .unprocessableContent)
            #expect((try Self.json(unnamed)["error"] as? [String: Any])?["field"] as? String == "app_user_id")

            let accepted = try await client.execute(
                uri: "/v1/users/forget", method: .post, headers: Self.bearer(Self.backendKey),
                body: ByteBuffer(string: #"{"app_id":"\#(Self.appID)","app_user_id":"forget-me-4711"}"#))
            #expect(accepted.status == .accepted)
            let answer = try Self.json(accepted)
            #expect(answer["status"] as? String == "accepted")
            #expect(answer["records_forgotten"] as? Int == 1)
            let requestID = try #require(answer["request_id"] as? String)

            var status: [String: Any] = [:]
            #expect(
                try await env.eventually {
                    let response = try await client.execute(
                        uri: "/v1/users/forget/\(requestID)", method: .get, headers: Self.bearer(Self.backendKey))
                    status = try Self.json(response)
                    return status["status"] as? String == "done"
                })
            let sinks = try #require(status["sinks"] as? [String: [String: Any]])
            #expect(
                sinks.mapValues { $0["status"] as? String } == [
                    "local": "done", "hook": "done", "mp": "done", "plugin": "done",
                ])
            let digest = SHA256.hash(data: Data("app_user_id:forget-me-4711".utf8))
                .map { String(format: "%02x", $0) }.joined()
            #expect(status["user_sha256"] as? String == digest)
            #expect(!"\(status)".contains("forget-me-4711"))
            // Another app's backend sees no such request.
            let elsewhere = try await client.execute(
                uri: "/v1/users/forget/\(requestID)", method: .get, headers: Self.bearer(Self.otherBackendKey))
            #expect(elsewhere.status == .notFound)

            // The webhook got a signed `user.forgotten` event naming the user.
            let event = try #require(hook.requests.dropFirst(hookBefore).last)
            let fields = try #require(try JSONSerialization.jsonObject(with: event.body) as? [String: Any])
            #expect(fields["type"] as? String == "user.forgotten")
            #expect(fields["app_user_id"] as? String == "forget-me-4711")
            #expect(fields["request_id"] as? String == requestID)
            #expect(fields["app_id"] as? String == Self.appID)
            #expect(event.idempotencyKey == "forget-\(requestID)")
            #expect(
                WebhookSignature.verify(
                    header: try #require(event.signature), body: event.body, secret: WebhookSinkTests.secret,
                    now: Int(Date().timeIntervalSince1970)))
            // Mixpanel was asked to delete the profile, with the project token.
            let deletions = try mixpanel.bodies.withLock { bodies in
                try bodies.flatMap { try JSONSerialization.jsonObject(with: $0) as? [[String: Any]] ?? [] }
            }.filter { $0.keys.contains("$delete") }
            #expect(deletions.count == 1)
            #expect(deletions.first?["$distinct_id"] as? String == "forget-me-4711")
            #expect(deletions.first?["$token"] as? String == MixpanelSinkTests.token)
            // The plugin removed the user's line; the other stays.
            let pluginLines = try String(contentsOfFile: pluginFile, encoding: .utf8)
            #expect(!pluginLines.contains("forget-me-4711") && pluginLines.contains("keep-me-0815"))
        }

        // Nothing of the user is left in the file, its write-ahead log included.
        let queue = try DatabaseQueue(path: env.databasePath)
        try await queue.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
        let bytes = try Self.fileBytes(env)
        #expect(bytes.range(of: Data("forget-me-4711".utf8)) == nil)
        #expect(bytes.range(of: Data("keep-me-0815".utf8)) != nil)
        // The install still counts, under a stand-in.
        let kept = try await queue.read { db in
            try String.fetchAll(
                db, sql: "SELECT json_extract(body, '$.app_user_id') FROM records WHERE provider = 'iad'")
        }
        #expect(kept.count == 2)
        #expect(kept.contains { $0.hasPrefix("forgotten-") })
    }
}

extension ForgetEndToEndTests {
    /// The webhook's receiver down when the request comes: the request waits in its outbox,
    /// shows `pending` with the receiver's answer, and is done once the receiver is back.
    @Test func aForgetDuringASinkOutageCompletesWhenTheSinkReturns() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let hook = WebhookSinkTests.Receiver()
        let mixpanel = MixpanelSinkTests.FakeMixpanel()
        let pluginFile = env.directory.appendingPathComponent("plugin.ndjson").path
        try await withGateway(env, hook: hook, mixpanel: mixpanel, pluginFile: pluginFile) { client in
            let install = try await client.execute(
                uri: "/v1/iad", method: .post, headers: Self.bearer(Self.appKey),
                body: ByteBuffer(string: IAdPayloads.attributed(user: "outage-user-31")))
            #expect(install.status == .accepted)
            #expect(try await env.eventually { hook.requests.count == 1 })
            // Down for the next five answers, whatever the gateway sends meanwhile.
            hook.script.withLock { $0 = Array(repeating: (503, nil), count: 5) }
            let accepted = try await client.execute(
                uri: "/v1/users/forget", method: .post, headers: Self.bearer(Self.backendKey),
                body: ByteBuffer(string: #"{"app_id":"\#(Self.appID)","app_user_id":"outage-user-31"}"#))
            let requestID = try #require(try Self.json(accepted)["request_id"] as? String)
            func hookStatus() async throws -> [String: Any]? {
                let response = try await client.execute(
                    uri: "/v1/users/forget/\(requestID)", method: .get, headers: Self.bearer(Self.backendKey))
                return (try Self.json(response)["sinks"] as? [String: [String: Any]])?["hook"]
            }
            #expect(
                try await env.eventually {
                    try await hookStatus()?["reason"] as? String == "webhook answered 503"
                })
            #expect(try await env.eventually { try await hookStatus()?["status"] as? String == "done" })
            let forgotten = hook.requests.compactMap {
                try? JSONSerialization.jsonObject(with: $0.body) as? [String: Any]
            }.filter { $0["type"] as? String == "user.forgotten" }
            // Every attempt was the same request; the last one was taken.
            #expect(forgotten.count == 6)
            #expect(Set(forgotten.compactMap { $0["request_id"] as? String }) == [requestID])
        }
    }
}

extension ForgetEndToEndTests {
    static let postgresServers: [String] = TestPostgres.expected ? ["postgres"] : []

    /// On PostgreSQL, with a `postgres` sink in the same database: once the request is done,
    /// no table holds the user's id.
    @Test(arguments: postgresServers)
    func onPostgreSQLNoTableHoldsTheForgottenUser(server: String) async throws {
        let database = try await TestPostgres.newDatabase()
        let yaml = """
            server: { host: 127.0.0.1, port: 0, max_body_bytes: 65536, log_level: warning }
            storage: { postgres: { url: "\(database)", pool_size: 4, timeout_ms: \(TestPostgres.timeoutMs) } }
            auth:
              api_keys:
                - { app_id: "\(Self.appID)", key: "\(Self.appKey)" }
                - { app_id: "\(Self.appID)", key: "\(Self.backendKey)", scope: backend }
            providers:
              iad: { enabled: true }
            sinks:
              table: { type: postgres, backoff_initial_ms: 10, backoff_max_ms: 100 }
            """
        let config = try ConfigLoader.parse(yaml: yaml, file: "forget-pg.yaml", environment: [:], registry: .builtIn)
        let gateway = try await Gateway.build(configuration: config)
        let env = try TestEnvironment()
        defer { env.remove() }
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            for user in ["pg-forget-me-77", "pg-keep-me-78"] {
                let response = try await client.execute(
                    uri: "/v1/iad", method: .post, headers: Self.bearer(Self.appKey),
                    body: ByteBuffer(string: IAdPayloads.attributed(user: user)))
                #expect(response.status == .accepted)
            }
            #expect(
                try await env.eventually {
                    try await Self.rows(holding: "pg-", in: database)["attribution_records"] == 2
                })
            // The search finds the user before: in the record and in the sink's row.
            let before = try await Self.rows(holding: "pg-forget-me-77", in: database)
            #expect(before["records"] == 1 && before["attribution_records"] == 1)
            let accepted = try await client.execute(
                uri: "/v1/users/forget", method: .post, headers: Self.bearer(Self.backendKey),
                body: ByteBuffer(string: #"{"app_id":"\#(Self.appID)","app_user_id":"pg-forget-me-77"}"#))
            #expect(accepted.status == .accepted)
            let requestID = try #require(try Self.json(accepted)["request_id"] as? String)
            #expect(
                try await env.eventually {
                    let response = try await client.execute(
                        uri: "/v1/users/forget/\(requestID)", method: .get, headers: Self.bearer(Self.backendKey))
                    return try Self.json(response)["status"] as? String == "done"
                })
        }
        #expect(try await Self.rows(holding: "pg-forget-me-77", in: database).values.allSatisfy { $0 == 0 })
        let kept = try await Self.rows(holding: "pg-keep-me-78", in: database)
        #expect(kept["records"] == 1 && kept["attribution_records"] == 1)
    }

    /// For each table of the database, how many rows hold `text` anywhere.
    static func rows(holding text: String, in database: PostgresURL) async throws -> [String: Int64] {
        try await TestPostgres.withClient(database) { client in
            var tables: [String] = []
            for try await name in try await client.query(
                "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public'"
            ).decode(String.self) {
                tables.append(name)
            }
            var counts: [String: Int64] = [:]
            for table in tables {
                let sql = "SELECT count(*) FROM \"\(table)\" t WHERE t::text LIKE '%\(text)%'"
                for try await count in try await client.query(PostgresQuery(unsafeSQL: sql)).decode(Int64.self) {
                    counts[table] = count
                }
            }
            return counts
        }
    }
}

extension ForgetEndToEndTests {
    /// Without backend keys the route is not open, as the ingest routes are: one request
    /// rewrites a user's records and asks every destination to delete them.
    @Test func withoutBackendKeysNobodyMayForget() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try env.configuration())
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            let refused = try await client.execute(
                uri: "/v1/users/forget", method: .post,
                body: ByteBuffer(string: #"{"app_id":"\#(Self.appID)","app_user_id":"someone-55"}"#))
            #expect(refused.status == .forbidden)
            #expect((try Self.json(refused)["error"] as? [String: Any])?["field"] as? String == "authorization")
            let status = try await client.execute(uri: "/v1/users/forget/anything", method: .get)
            #expect(status.status == .forbidden)
        }
    }
}
