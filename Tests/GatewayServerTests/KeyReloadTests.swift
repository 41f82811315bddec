import Foundation
import Testing

/// `SIGHUP` replaces `auth.api_keys` while the gateway serves: keys rotate without a restart.
@Suite struct KeyReloadTests {
    static let oldKey = "old-key-for-1234567890"
    static let newKey = "new-key-for-1234567890"

    @Test func aHangupRotatesTheKeysAndAFileThatNoLongerChecksOutChangesNothing() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = env.directory.appendingPathComponent("keys.yaml").path
        func write(keys: [String], broken: Bool = false) throws {
            var yaml = env.yaml(logLevel: "info") + "\nauth:\n  api_keys:\n"
            yaml += keys.map { "    - { app_id: \"1234567890\", key: \"\($0)\" }\n" }.joined()
            if broken { yaml = yaml.replacingOccurrences(of: "port: 0", with: "port: abc") }
            try yaml.write(toFile: config, atomically: true, encoding: .utf8)
        }
        try write(keys: [Self.oldKey])
        let logURL = env.directory.appendingPathComponent("serve.log")
        let gateway = try GatewayProcess(config: config, logURL: logURL)
        try await gateway.start()
        var users = 0
        func status(_ key: String) async throws -> Int {
            users += 1
            return try await gateway.post(
                "/v1/iad", body: IAdPayloads.attributed(user: "reload-\(users)"),
                headers: ["Authorization": "Bearer \(key)"]
            ).0
        }
        func log() -> String { (try? String(contentsOf: logURL, encoding: .utf8)) ?? "" }
        /// Polls until `key` is answered `expected`; a bound, not a speed claim.
        func eventually(_ key: String, _ expected: Int) async throws -> Bool {
            try await env.eventually(seconds: 30) { try await status(key) == expected }
        }

        #expect(try await status(Self.oldKey) == 202)
        #expect(try await status(Self.newKey) == 401)

        // Rotation: the new key is added, then the clients move, then the old one goes.
        try write(keys: [Self.oldKey, Self.newKey])
        gateway.signal(SIGHUP)
        #expect(try await eventually(Self.newKey, 202))
        #expect(try await status(Self.oldKey) == 202)

        // A file with a mistake in it: refused as a whole, the keys in use stay. The log
        // says where, not what: this typo (no colon) makes the key part of the message.
        try write(keys: [Self.newKey], broken: true)
        try String(contentsOfFile: config, encoding: .utf8)
            .replacingOccurrences(of: "key: \"\(Self.newKey)\"", with: "key \"\(Self.newKey)\"")
            .write(toFile: config, atomically: true, encoding: .utf8)
        gateway.signal(SIGHUP)
        #expect(try await env.eventually(seconds: 30) { log().contains("configuration reload refused") })
        #expect(log().contains("keys.yaml:1:") && log().contains("check-config"))
        #expect(try await status(Self.oldKey) == 202)

        // An empty file (an editor saving in place) would turn authentication off: refused.
        try "".write(toFile: config, atomically: true, encoding: .utf8)
        gateway.signal(SIGHUP)
        #expect(try await env.eventually(seconds: 30) { log().contains("turning authentication off takes a restart") })
        #expect(try await status(Self.oldKey) == 202)
        #expect(try await status("no-such-key-0123456789") == 401)

        try write(keys: [Self.newKey])
        gateway.signal(SIGHUP)
        #expect(try await eventually(Self.oldKey, 401))
        #expect(try await status(Self.newKey) == 202)

        // The log counts keys; it never holds one.
        #expect(log().contains("auth.api_keys app 1234567890: 0 added, 1 removed"))
        #expect(!log().contains(Self.oldKey) && !log().contains(Self.newKey))
        #expect(try await gateway.stop(SIGTERM))
        #expect(gateway.process.terminationStatus == 0)
    }

    /// An editor saving in place, caught by the HUP after the first key: the file still
    /// checks out (no providers, sinks or routes needed), and it revoked the other keys.
    @Test func aFileCutShortWhileSavedRevokesNoKey() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = env.directory.appendingPathComponent("keys.yaml").path
        var lines = env.yaml(logLevel: "info").components(separatedBy: "\n")
        lines.insert(
            contentsOf: ["auth:", "  api_keys:"]
                + [Self.oldKey, Self.newKey].map { "    - { app_id: \"1234567890\", key: \"\($0)\" }" },
            at: 2)
        let full = lines.joined(separator: "\n") + "\n"
        try full.write(toFile: config, atomically: true, encoding: .utf8)
        let logURL = env.directory.appendingPathComponent("serve.log")
        let gateway = try GatewayProcess(config: config, logURL: logURL)
        try await gateway.start()
        func log() -> String { (try? String(contentsOf: logURL, encoding: .utf8)) ?? "" }
        func status(_ key: String) async throws -> Int {
            try await gateway.post(
                "/v1/iad", body: IAdPayloads.attributed(user: "cut-\(UUID())"),
                headers: ["Authorization": "Bearer \(key)"]
            ).0
        }
        #expect(try await status(Self.newKey) == 202)

        let cut = try #require(full.range(of: Self.oldKey)).upperBound
        let prefix = String(full[..<cut]) + "\" }\n"
        try prefix.write(toFile: config, atomically: false, encoding: .utf8)
        gateway.signal(SIGHUP)
        #expect(
            try await env.eventually(seconds: 30) { log().contains("the file no longer has what the server runs with") }
        )
        #expect(log().contains("provider iad") && log().contains("sink local"))
        #expect(try await status(Self.newKey) == 202)

        // Saved whole, the same change of keys applies.
        try full.replacingOccurrences(of: "    - { app_id: \"1234567890\", key: \"\(Self.newKey)\" }\n", with: "")
            .write(toFile: config, atomically: true, encoding: .utf8)
        gateway.signal(SIGHUP)
        #expect(try await env.eventually(seconds: 30) { try await status(Self.newKey) == 401 })
        #expect(try await status(Self.oldKey) == 202)
        #expect(try await gateway.stop(SIGTERM))
    }
}
