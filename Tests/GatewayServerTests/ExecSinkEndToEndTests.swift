import Foundation
import GatewayConfig
import GatewayCore
import GatewayServer
import GatewayStorage
import Hummingbird
import HummingbirdTesting
import Testing

/// The exec sink with a plugin written in Python, through the real server.
@Suite struct ExecSinkEndToEndTests {
    static let plugin = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/exec_plugin.py").path

    @Test func aPythonPluginReceivesRecordsAndIsRestartedWhenItDies() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let received = env.directory.appendingPathComponent("received.jsonl").path
        let yaml = """
            server: { host: 127.0.0.1, port: 0, log_level: critical }
            storage: { sqlite: { path: \(env.databasePath), durability: normal } }
            providers: { iad: { enabled: true } }
            sinks:
              python:
                type: exec
                command: [python3, \(Self.plugin), \(received)]
                timeout_ms: 20000
                backoff_initial_ms: 10
                backoff_max_ms: 50
            """
        let configuration = try ConfigLoader.parse(yaml: yaml, file: "exec.yaml", environment: [:], registry: .builtIn)
        let gateway = try await Gateway.build(configuration: configuration)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            for user in ["alice", "crash", "bad", "bob"] {
                let response = try await client.execute(
                    uri: "/v1/iad", method: .post, body: ByteBuffer(string: IAdPayloads.attributed(user: user)))
                #expect(response.status == .accepted)
            }
            #expect(
                try await env.eventually {
                    try await gateway.store.outboxStats().isEmpty
                })
            let lines = try String(contentsOfFile: received, encoding: .utf8).split(separator: "\n")
            let users = lines.compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["user"] as? String
            }
            // The plugin died once on "crash" and was started again.
            #expect(FileManager.default.fileExists(atPath: received + ".crashed"))
            // Every accepted record once, "bad" rejected, "crash" delivered after the restart.
            #expect(users.sorted() == ["alice", "bob", "crash"])
            #expect(lines.allSatisfy { $0.contains(#""keyword": "meditation app""#) })
            let letters = try await gateway.store.deadLetters(sink: "python", limit: 10)
            #expect(letters.map(\.error) == ["bad user"])
        }
    }

    /// The gateway's open pipes.
    static func pipes(of pid: Int32) -> Int {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        return fds.filter { fd in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"))?.hasPrefix("pipe:")
                == true
        }.count
    }

    /// A plugin that dies after every record (one crashing on bad input is retried up to
    /// `max_attempts` times) is started again each time; each start left two pipes open in
    /// the gateway, until a thousand restarts ended the process.
    @Test func aPluginRestartedAgainAndAgainLeavesNoPipesOpen() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let once = """
            import json, sys
            line = sys.stdin.readline()
            print(json.dumps({"record_id": json.loads(line)["record_id"], "status": "ok"}), flush=True)
            """
        let config = env.directory.appendingPathComponent("exec.yaml").path
        try """
        server: { host: 127.0.0.1, port: 0, log_level: info }
        storage: { sqlite: { path: \(env.databasePath), durability: normal } }
        providers: { iad: { enabled: true } }
        sinks:
          once: { type: exec, command: [python3, -c, \(JSONValue.string(once).jsonText)], max_batch_size: 1 }
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let server = try GatewayProcess(config: config, logURL: env.directory.appendingPathComponent("serve.log"))
        try await server.start()
        defer { server.kill(SIGKILL) }
        let pid = server.process.processIdentifier
        func deliver(_ users: [String]) async throws {
            for user in users {
                #expect(try await server.post("/v1/iad", body: IAdPayloads.attributed(user: user)).0 == 202)
            }
            #expect(
                try await env.eventually(seconds: 60) {
                    try await SQLiteStore(path: env.databasePath, upgrade: .never).outboxStats().isEmpty
                })
        }
        try await deliver(["first"])
        let before = Self.pipes(of: pid)
        try await deliver((1...30).map { "restart-\($0)" })
        let after = Self.pipes(of: pid)
        #expect(after <= before + 2, "pipes: \(before) after one plugin, \(after) after 31")
    }
}
