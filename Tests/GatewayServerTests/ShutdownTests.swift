import Foundation
import GRDB
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
        #expect(try await env.eventually {
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
        #expect(try await env.eventually {
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
}
