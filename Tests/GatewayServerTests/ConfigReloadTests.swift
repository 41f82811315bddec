import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Testing

/// A reload (`SIGHUP`, or `serve --watch-config` seeing the file change) checks the file as
/// a whole, is counted `applied` or `rejected`, and logs what changed and, apart, what waits
/// for the next start.
@Suite struct ConfigReloadTests {
    static let oldKey = "old-key-for-1234567890"
    static let newKey = "new-key-for-1234567890"

    struct Running {
        let env: TestEnvironment
        let config: String
        let logURL: URL
        let gateway: GatewayProcess

        init(options: [String] = []) async throws {
            env = try TestEnvironment()
            config = env.directory.appendingPathComponent("reload.yaml").path
            logURL = env.directory.appendingPathComponent("serve.log")
            try Self.yaml(env, keys: [ConfigReloadTests.oldKey]).write(
                toFile: config, atomically: true, encoding: .utf8)
            gateway = try GatewayProcess(config: config, logURL: logURL, options: options)
            try await gateway.start()
        }

        static func yaml(_ env: TestEnvironment, keys: [String]) -> String {
            env.yaml(logLevel: "info") + "\nauth:\n  api_keys:\n"
                + keys.map { "    - { app_id: \"1234567890\", key: \"\($0)\" }\n" }.joined()
        }

        func write(_ yaml: String) throws {
            try yaml.write(toFile: config, atomically: true, encoding: .utf8)
        }

        func log() -> String { (try? String(contentsOf: logURL, encoding: .utf8)) ?? "" }

        func status(_ key: String) async throws -> Int {
            try await gateway.post(
                "/v1/iad", body: IAdPayloads.attributed(user: "reload-\(UUID())"),
                headers: ["Authorization": "Bearer \(key)"]
            ).0
        }

        func reloads(_ result: String) async throws -> Int? {
            let metrics = try await gateway.text("/metrics")
            let prefix = "gateway_config_reloads_total{result=\"\(result)\"} "
            guard let line = metrics.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return nil }
            return Int(line.dropFirst(prefix.count))
        }
    }

    @Test func aRejectedReloadChangesNothingAndEachReloadIsCounted() async throws {
        let running = try await Running()
        defer { running.env.remove() }
        #expect(try await running.reloads("applied") == 0)
        #expect(try await running.reloads("rejected") == 0)

        // A mistake in a section that does not reload live still refuses the whole file.
        let valid = Running.yaml(running.env, keys: [Self.oldKey, Self.newKey])
        try running.write(valid.replacingOccurrences(of: "backoff_max_ms: 100", with: "backoff_max_ms: soon"))
        running.gateway.signal(SIGHUP)
        #expect(try await running.env.eventually(seconds: 30) { try await running.reloads("rejected") == 1 })
        #expect(running.log().contains("reload.yaml:") && running.log().contains("backoff_max_ms"))
        #expect(try await running.status(Self.newKey) == 401)
        #expect(try await running.reloads("applied") == 0)

        // Valid: the keys and the sink's change apply at once; the server's change is
        // named as waiting for the next start.
        try running.write(
            valid.replacingOccurrences(of: "backoff_max_ms: 100", with: "backoff_max_ms: 200")
                .replacingOccurrences(of: "max_body_bytes: 65536", with: "max_body_bytes: 131072"))
        running.gateway.signal(SIGHUP)
        #expect(try await running.env.eventually(seconds: 30) { try await running.reloads("applied") == 1 })
        #expect(try await running.status(Self.newKey) == 202)
        let log = running.log()
        #expect(log.contains("auth.api_keys app 1234567890: 1 added, 0 removed"), "\(log)")
        #expect(log.contains("configuration changes not applied live: they take effect at the next start"))
        #expect(log.contains("sink local: changed backoff_max_ms: 100 -> 200"))
        #expect(!log.contains("backoff_max_ms: 100 -> 200 (takes effect"))
        #expect(log.contains("server.max_body_bytes: 65536 -> 131072"))
        #expect(!log.contains(Self.oldKey) && !log.contains(Self.newKey))
        #expect(try await running.reloads("rejected") == 1)
        #expect(try await running.gateway.stop(SIGTERM))
    }

    /// `server.log_level` applies at once: a reload to `error` hides its own `info` line,
    /// and the next one, back to `info`, shows its.
    @Test func theLogLevelReloadsLive() async throws {
        let running = try await Running()
        defer { running.env.remove() }
        let valid = Running.yaml(running.env, keys: [Self.oldKey])
        #expect(valid.contains("log_level: info"))
        try running.write(valid.replacingOccurrences(of: "log_level: info", with: "log_level: error"))
        running.gateway.signal(SIGHUP)
        #expect(try await running.env.eventually(seconds: 30) { try await running.reloads("applied") == 1 })
        #expect(!running.log().contains("configuration reloaded"), "\(running.log())")

        try running.write(valid)
        running.gateway.signal(SIGHUP)
        #expect(try await running.env.eventually(seconds: 30) { try await running.reloads("applied") == 2 })
        #expect(try await running.env.eventually(seconds: 30) { running.log().contains("configuration reloaded") })
        let log = running.log()
        #expect(log.contains("server.log_level: error -> info") && !log.contains("log_level: error -> info (takes"))
        #expect(try await running.gateway.stop(SIGTERM))
    }

    /// `server.rate_limits` applies at the next request after a reload.
    @Test func rateLimitsReloadLive() async throws {
        let running = try await Running()
        defer { running.env.remove() }
        for _ in 0..<5 { #expect(try await running.status(Self.oldKey) == 202) }
        try running.write(
            Running.yaml(running.env, keys: [Self.oldKey]).replacingOccurrences(
                of: "log_level: info }",
                with: "log_level: info, rate_limits: { per_ip: { per_second: 1, burst: 2 } } }"))
        running.gateway.signal(SIGHUP)
        #expect(try await running.env.eventually(seconds: 30) { try await running.reloads("applied") == 1 })
        // Twenty at once: with a burst of 2 and a token a second, only a machine taking
        // eighteen seconds to send them would see none refused.
        let port = running.gateway.port
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/v1/iad")!)
                    request.httpMethod = "POST"
                    request.setValue("Bearer \(Self.oldKey)", forHTTPHeaderField: "Authorization")
                    request.httpBody = Data(IAdPayloads.attributed(user: "burst-\(UUID())").utf8)
                    let (_, response) = try await URLSession.shared.data(for: request)
                    return (response as? HTTPURLResponse)?.statusCode ?? 0
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses.contains(429), "\(statuses)")
        let log = running.log()
        #expect(log.contains("server.rate_limits.per_ip: off -> 1/s, burst 2"), "\(log)")
        #expect(!log.contains("server.rate_limits.per_ip: off -> 1/s, burst 2 (takes effect"))
        #expect(try await running.gateway.stop(SIGTERM))
    }

    /// `auth.operator_keys` applies at the next request after a reload, as `api_keys` do.
    @Test func operatorKeysReloadLive() async throws {
        let running = try await Running()
        defer { running.env.remove() }
        let operatorKey = "operator-key-0123456789"
        func reportStatus() async throws -> Int {
            try await running.gateway.get("/v1/reports/keywords", headers: ["Authorization": "Bearer \(operatorKey)"]).0
        }
        #expect(try await reportStatus() == 403)
        try running.write(
            Running.yaml(running.env, keys: [Self.oldKey]) + "  operator_keys: [ \"\(operatorKey)\" ]\n")
        running.gateway.signal(SIGHUP)
        #expect(try await running.env.eventually(seconds: 30) { try await running.reloads("applied") == 1 })
        #expect(try await reportStatus() == 200)
        let log = running.log()
        #expect(log.contains("auth.operator_keys: 1 added, 0 removed"), "\(log)")
        #expect(!log.contains("auth.operator_keys: 1 added, 0 removed (takes effect"), "\(log)")
        #expect(!log.contains(operatorKey))
        #expect(try await running.gateway.stop(SIGTERM))
    }

    /// The watcher sees a file replaced by a rename (as editors save) and reloads it.
    @Test func watchConfigReloadsAnEditedFile() async throws {
        let running = try await Running(options: ["--watch-config"])
        defer { running.env.remove() }
        #expect(try await running.status(Self.newKey) == 401)
        try running.write(Running.yaml(running.env, keys: [Self.oldKey, Self.newKey]))
        #expect(try await running.env.eventually(seconds: 60) { try await running.status(Self.newKey) == 202 })
        try running.write(Running.yaml(running.env, keys: [Self.newKey]))
        #expect(try await running.env.eventually(seconds: 60) { try await running.status(Self.oldKey) == 401 })
        #expect(try await running.status(Self.newKey) == 202)
        #expect(try await running.env.eventually(seconds: 30) { try await running.reloads("applied") ?? 0 >= 2 })
        #expect(try await running.gateway.stop(SIGTERM))
    }
}
