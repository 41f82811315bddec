import Foundation
import GatewayConfig
import Hummingbird
import HummingbirdTesting
import Logging
import Testing

@testable import GatewayServer

/// A gateway on loopback serving the configuration in `file`, with a function that writes
/// a new file and reloads it in the process, as `SIGHUP` does, returning once the reload
/// was applied or refused (refused fails the test).
func withReloadingGateway(
    file: String, environment: [String: String] = [:], logger: Logger = Logger(label: "gateway"),
    _ body:
        @escaping @Sendable (
            _ client: TestClientProtocol, _ gateway: Gateway,
            _ reload: @escaping @Sendable (String) async throws -> Void
        ) async throws -> Void
) async throws {
    let load: @Sendable () throws -> GatewayConfiguration = {
        try ConfigLoader.load(path: file, environment: environment, registry: .builtIn)
    }
    let gateway = try await Gateway.build(configuration: try load(), logger: logger)
    let reloader = ConfigReloader(gateway: gateway, removalSettle: .milliseconds(20), load: load)
    try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
        @Sendable func applied() async throws -> Int {
            let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            let prefix = #"gateway_config_reloads_total{result="applied"} "#
            let line = metrics.split(separator: "\n").first { $0.hasPrefix(prefix) }
            return line.flatMap { Int($0.dropFirst(prefix.count)) } ?? 0
        }
        try await body(client, gateway) { yaml in
            try yaml.write(toFile: file, atomically: true, encoding: .utf8)
            let before = try await applied()
            await reloader.reload()
            #expect(try await applied() == before + 1, "the reload was refused")
        }
    }
}
