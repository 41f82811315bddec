import Foundation
import GatewayConfig
import GatewayCore
import GatewayServer
import Hummingbird
import HummingbirdTesting
import Logging
import Synchronization
import Testing

/// `POST /v1/adservices` through the real server and SQLite, against a local fake of
/// Apple's endpoint. Waits are bounds for work to finish, never speed claims.
@Suite struct AdServicesEndToEndTests {
    struct Answer: Decodable {
        let record_id: String
        let status: String
        let duplicate_of: String?
        let resolution: String
        let resolved: Bool
        let attributed: Bool?
    }

    static func token(_ name: String) -> String {
        Data("adservices-token-\(name)".utf8).base64EncodedString()
    }

    static func body(_ token: String, user: String = "user-1") -> ByteBuffer {
        ByteBuffer(
            string: #"{"token": "\#(token)", "app_id": "1234567890", "app_user_id": "\#(user)", "att_status": 3}"#)
    }

    /// Provider settings that keep the schedule short; `options` overrides them. The
    /// timeout and the answer's wait are the longest allowed, so that a loaded machine
    /// never turns a call into a retry or a first answer into a pending one.
    static let defaults = [
        "timeout_ms": "30000", "not_found_interval_ms": "20", "error_backoff_initial_ms": "10",
        "error_backoff_max_ms": "200", "answer_wait_ms": "30000",
    ]

    func configuration(_ env: TestEnvironment, applePort: Int, options: [String: String] = [:]) throws
        -> GatewayConfiguration
    {
        let settings = Self.defaults.merging(options) { $1 }.sorted { $0.key < $1.key }
            .map { "    \($0.key): \($0.value)" }.joined(separator: "\n")
        let yaml = """
            server: { host: 127.0.0.1, port: 0, max_body_bytes: 65536, log_level: warning }
            storage: { sqlite: { path: \(env.databasePath), durability: normal } }
            providers:
              adservices:
                endpoint: http://127.0.0.1:\(applePort)/api/v1/
            \(settings)
            sinks:
              local: { type: sqlite, backoff_initial_ms: 10, backoff_max_ms: 100 }
            """
        return try ConfigLoader.parse(yaml: yaml, file: "adservices.yaml", environment: [:], registry: .builtIn)
    }

    /// Runs `body` with the fake Apple endpoint and a gateway that talks to it.
    func withGateway(
        _ apple: FakeAppleAdServices, env: TestEnvironment, options: [String: String] = [:],
        logger: Logger = Logger(label: "gateway"),
        _ body: @escaping @Sendable (TestClientProtocol, Gateway) async throws -> Void
    ) async throws {
        try await Application(router: apple.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            .test(.live) { appleClient in
                let config = try configuration(env, applePort: try #require(appleClient.port), options: options)
                let gateway = try await Gateway.build(configuration: config, logger: logger)
                try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
                    try await body(client, gateway)
                }
            }
    }

    func post(_ client: TestClientProtocol, _ body: ByteBuffer) async throws -> (HTTPResponse.Status, Answer) {
        let response = try await client.execute(uri: "/v1/adservices", method: .post, body: body)
        let answer = try JSONDecoder().decode(Answer.self, from: Data(response.body.readableBytesView))
        return (response.status, answer)
    }

    func stored(_ gateway: Gateway, _ id: String) async throws -> AttributionRecord? {
        try await gateway.store.record(id: id)
    }

    func eventuallyStored(_ gateway: Gateway, _ id: String, env: TestEnvironment) async throws -> AttributionRecord {
        #expect(try await env.eventually { try await gateway.store.record(id: id) != nil })
        return try #require(try await gateway.store.record(id: id))
    }

    /// A store that cannot be written (a full disk) fails every claim at once: the resolver
    /// pauses, doubling from 100 ms, rather than trying again a millisecond later, which
    /// would flood the log and burn CPU. The token waits and resolves.
    @Test func aStoreThatCannotBeWrittenPausesTheResolverRatherThanSpinning() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let apple = FakeAppleAdServices()
        let lines = Mutex<[String]>([])
        let handler = JSONLogHandler(label: "gateway", level: .info) { line in lines.withLock { $0.append(line) } }
        let logger = Logger(label: "gateway", factory: { _ in handler })
        try await withGateway(apple, env: env, options: ["answer_wait_ms": "0"], logger: logger) { client, gateway in
            try await gateway.sqlite!.pool.write { db in
                try db.execute(
                    sql:
                        "CREATE TRIGGER full BEFORE UPDATE ON pending BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
                )
            }
            let (status, answer) = try await post(client, Self.body(Self.token("disk-full")))
            #expect(status == .accepted)
            func failures() -> Int { lines.withLock { $0.filter { $0.contains("cannot read pending work") }.count } }
            #expect(try await env.eventually { failures() >= 1 })
            try await Task.sleep(for: .seconds(2))
            // At most six tries in two seconds from the first however fast the machine (0.1 +
            // 0.2 + 0.4 + 0.8 s of pauses); a slower one makes fewer.
            #expect((1...6).contains(failures()), "\(failures()) failed claims")
            #expect(apple.totalCalls == 0)
            try await gateway.sqlite!.pool.write { db in try db.execute(sql: "DROP TRIGGER full") }
            #expect(try await env.eventually { try await stored(gateway, answer.record_id) != nil })
        }
    }

    @Test func anAttributedAnswerIsNormalisedStoredDeliveredAndTheTokenSentOnce() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let apple = FakeAppleAdServices()
        let token = Self.token("attributed")
        try await withGateway(apple, env: env) { client, gateway in
            let (status, answer) = try await post(client, Self.body(token))
            #expect(status == .accepted)
            #expect(answer.status == "accepted")
            #expect(answer.resolved && answer.resolution == "resolved" && answer.attributed == true)

            let record = try #require(try await stored(gateway, answer.record_id))
            #expect(record.provider == "adservices")
            #expect(record.appUserID == "user-1")
            #expect(record.orgID == 40_669_820)
            #expect(record.campaignID == 542_370_539)
            #expect(record.adGroupID == 542_317_095)
            #expect(record.keywordID == 87_675_432)
            #expect(record.adID == 542_317_136)
            #expect(record.conversionType == "Download")
            #expect(record.claimType == "Click")
            #expect(record.countryOrRegion == "US")
            #expect(record.supplyPlacement == "APPSTORE_SEARCH_RESULTS")
            #expect(record.clickDate == ISO8601.parse("2024-10-08T17:17:00Z"))
            #expect(!record.isTest)
            // The raw keeps Apple's answer and the token's hash, not the token.
            let raw = String(decoding: try JSONEncoder().encode(record.raw), as: UTF8.self)
            #expect(raw.contains("542370539") && !raw.contains(token))
            #expect(try await env.eventually { try env.deliveredRecordIDs() == [answer.record_id] })

            // The same token again is the same record, and Apple is not asked twice.
            let (againStatus, again) = try await post(client, Self.body(token))
            #expect(againStatus == .ok)
            #expect(again.status == "duplicate" && again.duplicate_of == answer.record_id && again.resolved)
            #expect(apple.calls(token) == 1)

            // Another user's token is another record.
            let (_, other) = try await post(client, Self.body(Self.token("other"), user: "user-2"))
            #expect(other.record_id != answer.record_id)
            #expect(try await stored(gateway, other.record_id)?.appUserID == "user-2")
            #expect(apple.refused.isEmpty)
        }
    }

    @Test func organicAnswersInEveryShapeSeenAreUnattributedAndResolved() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let apple = FakeAppleAdServices()
        let bodies = [#"{"attribution":false}"#, "{}", #"{"error" : "1"}"#]
        for (index, body) in bodies.enumerated() {
            apple.script(Self.token("organic-\(index)"), [.init(status: 200, body: body)])
        }
        try await withGateway(apple, env: env) { client, gateway in
            for index in bodies.indices {
                let (status, answer) = try await post(
                    client, Self.body(Self.token("organic-\(index)"), user: "u\(index)"))
                #expect(status == .accepted)
                #expect(answer.attributed == false && answer.resolution == "resolved")
                let record = try #require(try await stored(gateway, answer.record_id))
                #expect(!record.attributed && record.campaignID == nil && record.keywordID == nil)
            }
        }
    }

    @Test func notFoundIsRetriedOnTheScheduleThenResolvedOrRecordedAsNotFound() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let apple = FakeAppleAdServices()
        let late = Self.token("late")
        let never = Self.token("never")
        apple.script(late, [.notFound, .notFound, .attributed()])
        apple.script(never, Array(repeating: .notFound, count: 10))
        try await withGateway(apple, env: env) { client, gateway in
            let (status, first) = try await post(client, Self.body(late))
            #expect(status == .accepted)
            #expect(!first.resolved && first.resolution == "pending" && first.attributed == nil)
            let record = try await eventuallyStored(gateway, first.record_id, env: env)
            #expect(record.attributed && record.resolution == .resolved && record.keywordID == 87_675_432)
            #expect(apple.calls(late) == 3)

            let (_, gone) = try await post(client, Self.body(never, user: "user-2"))
            let notFound = try await eventuallyStored(gateway, gone.record_id, env: env)
            #expect(notFound.resolution == .notFound && !notFound.attributed)
            // Apple asks for "a maximum of three attempts": the first call and two retries.
            #expect(apple.calls(never) == 3)
            #expect(try await gateway.store.pendingCounts().isEmpty)

            // Operators see each attempt's outcome and what still waits.
            let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            func attempts(_ outcome: String) -> String? {
                metrics.split(separator: "\n").first {
                    $0.hasPrefix("gateway_resolution_attempts_total{") && $0.contains(#"outcome="\#(outcome)""#)
                }?.split(separator: " ").last.map(String.init)
            }
            #expect(attempts("retry") == "4")
            #expect(attempts("resolved") == "1")
            #expect(attempts("not_found") == "1")
            // An outcome not seen yet is there at zero, so that its first rise counts.
            #expect(attempts("invalid") == "0")
            #expect(metrics.contains(#"gateway_pending_depth{provider="adservices"} 0"#))
        }
    }

    /// Found by 100,000 fuzzed bodies: SQLite gives text back to C up to its first NUL, so
    /// an app id `"\u0000"` was stored as itself and read back as `""`, and its second
    /// token was answered 503 (a key it could not recognise as its own).
    @Test func anIDWithANulCharacterIsRefusedByName() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withGateway(FakeAppleAdServices(), env: env) { client, _ in
            let body = #"{"token": "\#(Self.token("nul"))", "app_id": "\u0000", "app_user_id": "u-1"}"#
            for _ in 0..<2 {
                let response = try await client.execute(
                    uri: "/v1/adservices", method: .post, body: ByteBuffer(string: body))
                #expect(response.status == .unprocessableContent)
                #expect(String(buffer: response.body).contains(#""field":"app_id""#))
            }
        }
    }

    @Test func aBadTokenIsInvalidAtOnceAndNeverRetried() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let apple = FakeAppleAdServices()
        let token = Self.token("bad")
        apple.script(token, [.badToken, .attributed()])
        try await withGateway(apple, env: env) { client, gateway in
            let (_, answer) = try await post(client, Self.body(token))
            let record = try await eventuallyStored(gateway, answer.record_id, env: env)
            #expect(record.resolution == .invalid && !record.attributed)
            #expect(apple.calls(token) == 1)
        }
    }

    @Test func serverErrorsAndUnreadableAnswersAreRetried() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let apple = FakeAppleAdServices()
        let flaky = Self.token("flaky")
        let garbled = Self.token("garbled")
        let hopeless = Self.token("hopeless")
        let proxied = Self.token("proxied")
        let html = FakeAppleAdServices.Reply(status: 200, body: "<html>captive portal</html>")
        // A proxy's own JSON is not Apple's answer, and must not read as organic.
        apple.script(proxied, [.init(status: 200, body: #"{"status":"ok","cached":true}"#), .attributed()])
        apple.script(flaky, [.serverError, .init(status: 503, body: ""), .attributed()])
        apple.script(garbled, [html, .attributed()])
        apple.script(hopeless, [html, html, html, html])
        // Read part way (`attribution: true`, then an id that is no number), and too big to read.
        let halfRead = Self.token("half-read")
        let huge = Self.token("huge")
        let half = FakeAppleAdServices.Reply(status: 200, body: #"{"attribution":true,"orgId":"abc"}"#)
        let big = FakeAppleAdServices.Reply(
            status: 200, body: "<html>" + String(repeating: "x", count: 100_000) + "</html>")
        apple.script(halfRead, [half, half, half, half])
        apple.script(huge, [big, big, big, big])
        try await withGateway(apple, env: env, options: ["answer_wait_ms": "0"]) { client, gateway in
            var ids: [String: String] = [:]
            for (index, token) in [flaky, garbled, hopeless, proxied, halfRead, huge].enumerated() {
                let (status, answer) = try await post(client, Self.body(token, user: "u\(index)"))
                #expect(status == .accepted && !answer.resolved)
                ids[token] = answer.record_id
            }
            for token in [flaky, garbled, proxied] {
                let record = try await eventuallyStored(gateway, try #require(ids[token]), env: env)
                #expect(record.attributed && record.resolution == .resolved)
            }
            #expect(apple.calls(flaky) == 3)
            #expect(apple.calls(garbled) == 2)
            #expect(apple.calls(proxied) == 2)

            // An answer that never becomes readable is kept, as evidence, after three tries.
            let kept = try await eventuallyStored(gateway, try #require(ids[hopeless]), env: env)
            #expect(kept.resolution == .invalid && !kept.attributed)
            let raw = String(decoding: try JSONEncoder().encode(kept.raw), as: UTF8.self)
            #expect(raw.contains("captive portal"))
            #expect(apple.calls(hopeless) == 3)
            // Neither counts as attributed, whatever was read before the answer failed.
            for token in [halfRead, huge] {
                let record = try await eventuallyStored(gateway, try #require(ids[token]), env: env)
                #expect(record.resolution == .invalid && !record.attributed && record.orgID == nil, "\(token)")
                #expect(apple.calls(token) == 3, "\(token)")
            }
        }
    }

    /// An answer slower than the timeout (the shortest allowed, far below the answer's
    /// delay) is given up on and asked again. On a loaded machine the second call may time
    /// out too, and be asked again.
    @Test func anAnswerSlowerThanTheTimeoutIsAskedAgain() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let apple = FakeAppleAdServices()
        let slow = Self.token("slow")
        apple.script(slow, [.init(status: 200, body: #"{"attribution":false}"#, delay: .seconds(10)), .attributed()])
        let options = ["answer_wait_ms": "0", "timeout_ms": "1500"]
        try await withGateway(apple, env: env, options: options) { client, gateway in
            let (status, answer) = try await post(client, Self.body(slow))
            #expect(status == .accepted && !answer.resolved)
            let record = try await eventuallyStored(gateway, answer.record_id, env: env)
            #expect(record.attributed && record.resolution == .resolved)
            #expect(apple.calls(slow) >= 2)
        }
    }

    @Test func theRetryScheduleSurvivesARestart() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let apple = FakeAppleAdServices()
        let token = Self.token("restart")
        apple.script(token, [.notFound, .attributed()])
        // A retry far enough away that the first gateway is gone before it is due, on a
        // loaded CI machine too (1.5 s was not).
        let options = ["not_found_interval_ms": "8000"]
        let recordID = Mutex<String?>(nil)
        try await withGateway(apple, env: env, options: options) { client, gateway in
            let (_, answer) = try await post(client, Self.body(token))
            #expect(answer.resolution == "pending")
            recordID.withLock { $0 = answer.record_id }
            #expect(apple.calls(token) == 1)
            #expect(try await gateway.store.pendingCounts() == ["adservices": 1])
        }
        let id = try #require(recordID.withLock { $0 })
        try await withGateway(apple, env: env, options: options) { _, gateway in
            let record = try await eventuallyStored(gateway, id, env: env)
            #expect(record.attributed && record.resolution == .resolved)
            #expect(try await env.eventually { try env.deliveredRecordIDs() == [id] })
        }
        #expect(apple.calls(token) == 2)
    }

    @Test func aThousandTokensWhileAppleIsDownAllResolveOnceItIsBack() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let apple = FakeAppleAdServices(fallback: .serverError)
        let count = 1000
        try await withGateway(apple, env: env, options: ["answer_wait_ms": "0", "concurrency": "16"]) {
            client, gateway in
            var ids: Set<String> = []
            for index in 0..<count {
                let (status, answer) = try await post(
                    client, Self.body(Self.token("bulk-\(index)"), user: "bulk-\(index)"))
                #expect(status == .accepted)
                ids.insert(answer.record_id)
            }
            #expect(ids.count == count)
            #expect(try await env.eventually { apple.totalCalls >= count })
            apple.fallback.withLock { $0 = .attributed() }

            #expect(try await env.eventually(seconds: 120) { try await gateway.store.pendingCounts().isEmpty })
            #expect(try await env.eventually(seconds: 120) { try env.deliveredRecordIDs().count == count })
            let delivered = try env.deliveredRecordIDs()
            #expect(Set(delivered) == ids)
            for id in ids.prefix(20) {
                #expect(try await stored(gateway, id)?.attributed == true)
            }
        }
    }

    @Test(arguments: [
        (#"{"app_id": "1", "app_user_id": "u"}"#, "missing_field", "token"),
        (#"{"token": 42, "app_id": "1", "app_user_id": "u"}"#, "invalid_field", "token"),
        (#"{"token": "not a token!", "app_id": "1", "app_user_id": "u"}"#, "invalid_field", "token"),
        (#"{"token": "dG9rZW4=", "app_user_id": "u"}"#, "missing_field", "app_id"),
        (#"{"token": "dG9rZW4=", "app_id": "1", "app_user_id": "u", "att_status": 7}"#, "invalid_field", "att_status"),
    ])
    func badRequestsAreRefusedNamingTheFieldAndNeverReachApple(body: String, code: String, field: String) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let apple = FakeAppleAdServices()
        try await withGateway(apple, env: env) { client, gateway in
            let response = try await client.execute(
                uri: "/v1/adservices", method: .post, body: ByteBuffer(string: body))
            #expect(response.status.code == 422)
            let text = String(buffer: response.body)
            #expect(text.contains(#""code":"\#(code)""#) && text.contains(#""field":"\#(field)""#))
            #expect(try await gateway.store.pendingCounts().isEmpty)
        }
        #expect(apple.totalCalls == 0)
    }
}
