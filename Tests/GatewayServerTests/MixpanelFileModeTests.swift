import Foundation
import GRDB
import Testing

/// `mode: file` against a real disk running out: the gateway runs with a file size limit
/// (`ulimit -f`), so that appending to the day's file fails part way, as a full disk does.
@Suite struct MixpanelFileModeTests {
    @Test func anAppendThatFailsPartWayLeavesNoPartOfALineAndTheRetryWritesItWhole() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let directory = env.directory.appendingPathComponent("mixpanel").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // The day's events file 300 bytes short of the limit, which one event's line
        // (about 1 KB) passes. Tomorrow's too, should the day end meanwhile.
        let limit = 1 << 20
        let line = #"{"event":"earlier","properties":{}}"# + "\n"
        let prefill = String(repeating: line, count: (limit - 300) / line.utf8.count)
        for offset in [0.0, 86_400] {
            let day = String(ISO8601DateFormatter().string(from: Date().addingTimeInterval(offset)).prefix(10))
            try prefill.write(toFile: "\(directory)/events-\(day).ndjson", atomically: true, encoding: .utf8)
        }
        let config = env.directory.appendingPathComponent("file.yaml").path
        try """
        server: { host: 127.0.0.1, port: 0, log_level: info }
        storage: { sqlite: { path: \(env.databasePath), durability: normal } }
        providers: { iad: { enabled: true } }
        sinks:
          mp:
            type: mixpanel
            mode: file
            directory: \(directory)
            token: mp-file-token-0123
            event_name: install
            backoff_initial_ms: 50
            backoff_max_ms: 100
        """.write(toFile: config, atomically: true, encoding: .utf8)
        func attempts() throws -> Int {
            try DatabaseQueue(path: env.databasePath).read { db in
                try Int.fetchOne(db, sql: "SELECT MAX(attempts) FROM outbox") ?? 0
            }
        }
        func eventFiles() throws -> [String: String] {
            try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("events-") }
                .reduce(into: [:]) { $0[$1] = try String(contentsOfFile: "\(directory)/\($1)", encoding: .utf8) }
        }

        let full = try GatewayProcess(
            config: config, logURL: env.directory.appendingPathComponent("full.log"), fileSizeLimit: limit)
        try await full.start()
        #expect(try await full.post("/v1/iad", body: IAdPayloads.attributed(user: "disk-full")).0 == 202)
        #expect(try await env.eventually(seconds: 60) { try attempts() >= 2 }, "the append never failed")
        full.kill(SIGKILL)
        // Failed twice, and each time the file went back to its end: no part of a line.
        #expect(try eventFiles().values.allSatisfy { $0 == prefill })

        // Room again: the retry appends the whole line, after the others.
        let roomy = try GatewayProcess(config: config, logURL: env.directory.appendingPathComponent("roomy.log"))
        try await roomy.start()
        defer { roomy.kill(SIGKILL) }
        #expect(
            try await env.eventually(seconds: 60) {
                try DatabaseQueue(path: env.databasePath).read { db in
                    try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox")
                } == 0
            })
        let written = try eventFiles().values.filter { $0 != prefill }
        let added = try #require(written.first).dropFirst(prefill.count)
        #expect(written.count == 1)
        #expect(added.hasSuffix("\n") && added.dropLast().split(separator: "\n").count == 1, "\(added)")
        let event = try JSONSerialization.jsonObject(with: Data(added.utf8)) as? [String: Any]
        #expect(event?["event"] as? String == "install")
        // Every line holds the project token: the files the gateway makes are its user's alone.
        let engage = try #require(
            try FileManager.default.contentsOfDirectory(atPath: directory).first { $0.hasPrefix("engage-") })
        let mode = try FileManager.default.attributesOfItem(atPath: "\(directory)/\(engage)")[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }
}
