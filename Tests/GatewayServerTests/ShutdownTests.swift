import Foundation
import GRDB
import Hummingbird
import HummingbirdTesting
import Testing

/// SIGTERM as an orchestrator sends it, to the real executable: readiness fails first,
/// shutdown is bounded however long a sink takes, and nothing acknowledged is lost.
@Suite struct ShutdownTests {
    func launch(_ env: TestEnvironment, _ yaml: String, log: String) async throws -> GatewayProcess {
        let config = env.directory.appendingPathComponent("\(log).yaml").path
        try yaml.write(toFile: config, atomically: true, encoding: .utf8)
        let gateway = try GatewayProcess(config: config, logURL: env.directory.appendingPathComponent("\(log).log"))
        try await gateway.start()
        return gateway
    }

    func outbox(_ env: TestEnvironment) throws -> [(sink: String, attempts: Int)] {
        try DatabaseQueue(path: env.databasePath).read { db in
            try Row.fetchAll(db, sql: "SELECT sink, attempts FROM outbox").map { ($0["sink"], $0["attempts"]) }
        }
    }

    @Test func aBatchASinkHoldsPastTheShutdownTimeoutStaysInTheOutboxForTheNextStart() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let held = env.directory.appendingPathComponent("held.jsonl").path
        let received = env.directory.appendingPathComponent("received.jsonl").path
        func yaml(_ command: String) -> String {
            """
            server: { host: 127.0.0.1, port: 0, log_level: info, shutdown_delay_s: 1, shutdown_timeout_s: 1 }
            storage: { sqlite: { path: \(env.databasePath), durability: normal } }
            providers: { iad: { enabled: true } }
            sinks:
              plugin: { type: exec, command: \(command), timeout_ms: 600000 }
            """
        }
        // A plugin that takes the batch and never answers: only its 10-minute timeout
        // would end the call.
        let hanging = try await launch(env, yaml(#"[sh, -c, "head -n 1 > \#(held); exec sleep 600"]"#), log: "hanging")
        let (status, json) = try await hanging.post("/v1/iad", body: IAdPayloads.attributed(user: "in-flight"))
        #expect(status == 202)
        let recordID = try #require(json["record_id"] as? String)
        #expect(
            try await env.eventually {
                ((try? String(contentsOfFile: held, encoding: .utf8)) ?? "").contains(recordID)
            })

        // One signal: the delay and then the timeout run out by themselves.
        #expect(try await hanging.stop(SIGTERM), "shutdown waited for the sink's own timeout")
        #expect(hanging.process.terminationStatus == 0)
        let log = try String(contentsOf: hanging.logURL, encoding: .utf8)
        #expect(log.contains("shutting down"))
        #expect(log.contains("batch in flight left in the outbox by shutdown"))
        // Not a failed attempt: the sink never answered.
        #expect(try outbox(env).map(\.attempts) == [0])

        let plugin = ExecSinkEndToEndTests.plugin
        let working = try await launch(env, yaml("[python3, \(plugin), \(received)]"), log: "working")
        #expect(try await env.eventually { try outbox(env).isEmpty })
        #expect(try await working.stop(SIGTERM))
        let lines = try String(contentsOfFile: received, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 1)
        #expect(lines.first?.contains(recordID) == true)
    }

    @Test func readyzFailsThroughTheShutdownDelayWhileIngestGoesOnAndASecondSignalStopsAtOnce() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await launch(
            env,
            env.yaml(logLevel: "info").replacingOccurrences(
                of: "log_level: info", with: "log_level: info, shutdown_delay_s: 600"),
            log: "delay")
        #expect(try await gateway.get("/readyz").0 == 200)

        Foundation.kill(gateway.process.processIdentifier, SIGTERM)
        var readiness: (Int, [String: Any]) = (0, [:])
        #expect(
            try await env.eventually {
                readiness = try await gateway.get("/readyz")
                return readiness.0 == 503
            })
        #expect(readiness.1["problems"] as? [String] == ["shutting down"])
        #expect(try await gateway.get("/healthz").0 == 200)
        let (status, json) = try await gateway.post("/v1/iad", body: IAdPayloads.attributed(user: "late-caller"))
        #expect(status == 202)

        // The delay is ten minutes; the second signal does not wait for it.
        #expect(try await gateway.stop(SIGTERM))
        #expect(gateway.process.terminationStatus == 0)
        let log = try String(contentsOf: gateway.logURL, encoding: .utf8)
        #expect(log.contains("second signal: stopping now"))
        let stored = try await DatabaseQueue(path: env.databasePath).read { db in
            try String.fetchAll(db, sql: "SELECT record_id FROM records")
        }
        #expect(stored.contains(try #require(json["record_id"] as? String)))
    }

    /// With Apple silent, a stop waits for the calls already made and begins no others:
    /// every call would hold the stop for its whole timeout. The tokens not tried are
    /// released in the store, due at once, and the next start tries them.
    @Test func aStopBeginsNoCallToAppleAndTheNextStartTriesTheTokensLeft() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let tokens = (0..<6).map { AdServicesEndToEndTests.token("stop-\($0)") }
        // Apple, seen by each gateway through a port of its own, so that each one's calls
        // are counted apart; it holds every token until the test lets them go.
        let apples = [FakeAppleAdServices(), FakeAppleAdServices()]
        for apple in apples { apple.held.withLock { $0 = Set(tokens) } }
        @Sendable func yaml(_ port: Int) -> String {
            """
            server: { host: 127.0.0.1, port: 0, log_level: info, shutdown_timeout_s: 60 }
            storage: { sqlite: { path: \(env.databasePath), durability: normal } }
            providers:
              adservices: { endpoint: "http://127.0.0.1:\(port)/api/v1/", answer_wait_ms: 0, timeout_ms: 10000, concurrency: 2 }
            sinks: { local: { type: sqlite } }
            """
        }
        func serve(_ apple: FakeAppleAdServices, _ body: @escaping @Sendable (Int) async throws -> Void) async throws {
            try await Application(
                router: apple.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0))
            )
            .test(.live) { try await body(try #require($0.port)) }
        }
        // The tokens are taken and the gateway dies with them claimed: the next start
        // finds all six due at once, one round of six for two calls at a time.
        try await serve(apples[0]) { port in
            let first = try await launch(env, yaml(port), log: "first")
            for (index, token) in tokens.enumerated() {
                let body = #"{"token": "\#(token)", "app_id": "1234567890", "app_user_id": "user-\#(index)"}"#
                #expect(try await first.post("/v1/adservices", body: body).0 == 202)
            }
            first.kill(SIGKILL)
            apples[0].held.withLock { $0 = [] }  // its calls end, and its server with them
        }
        try await serve(apples[1]) { port in
            let second = try await launch(env, yaml(port), log: "second")
            #expect(try await env.eventually { apples[1].totalCalls == 2 })
            // Both calls hang until their timeout, after the signal; the four other tokens
            // of the round are not sent.
            #expect(try await second.stop(SIGTERM))
            #expect(second.process.terminationStatus == 0)
            #expect(apples[1].totalCalls == 2, "a call was begun after the signal")
            let log = try String(contentsOf: second.logURL, encoding: .utf8)
            #expect(log.contains("waiting for attempts in flight"), "\(log)")
            #expect(log.contains("attempts not begun: the resolver is stopping"), "\(log)")

            apples[1].held.withLock { $0 = [] }
            let third = try await launch(env, yaml(port), log: "third")
            #expect(
                try await env.eventually {
                    try await DatabaseQueue(path: env.databasePath).read { db in
                        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM pending") == 0
                            && Int.fetchOne(db, sql: "SELECT COUNT(*) FROM records") == 6
                    }
                })
            #expect(try await third.stop(SIGTERM))
        }
    }
}
