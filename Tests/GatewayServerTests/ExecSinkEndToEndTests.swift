import Foundation
import GatewayConfig
import GatewayServer
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
            #expect(try await env.eventually {
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
}
