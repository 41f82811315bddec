import Foundation
import GatewayConfig
import GatewayServer
import Hummingbird
import HummingbirdTesting
import Testing

/// A sink from `Plugins/` (the CSV example), chosen by `type:` in config, fed through the
/// real server beside the built-in SQLite sink.
@Suite struct PluginSinkEndToEndTests {
    @Test func theCSVPluginReceivesRoutedRecords() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let csv = env.directory.appendingPathComponent("exports/attributed.csv").path
        let yaml = """
            server: { host: 127.0.0.1, port: 0, log_level: warning }
            storage: { sqlite: { path: \(env.databasePath), durability: normal } }
            providers: { iad: { enabled: true } }
            sinks:
              local: { type: sqlite }
              export: { type: csv, path: \(csv), columns: [app_user_id, keyword, campaign_name] }
            routes:
              - sinks: [local]
              - sinks: [export]
                where: { attributed: true }
            """
        let configuration = try ConfigLoader.parse(yaml: yaml, file: "csv.yaml", environment: [:], registry: .builtIn)
        let gateway = try await Gateway.build(configuration: configuration)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            let attributed = try await client.execute(
                uri: "/v1/iad", method: .post, body: ByteBuffer(string: IAdPayloads.attributed(user: "csv-user")))
            #expect(attributed.status == .accepted)
            let organic = #"{"app_id": "1", "app_user_id": "organic", "Version3.1": {"iad-attribution": "false"}}"#
            #expect(
                try await client.execute(uri: "/v1/iad", method: .post, body: ByteBuffer(string: organic)).status
                    == .accepted)

            #expect(try await env.eventually { try env.deliveredRecordIDs().count == 2 })
            #expect(
                try await env.eventually {
                    (try? String(contentsOfFile: csv, encoding: .utf8))?.contains(
                        "csv-user,meditation app,US Search - Meditation") == true
                })
            let text = try String(contentsOfFile: csv, encoding: .utf8)
            #expect(!text.contains("organic"))
            #expect(text.split(separator: "\r\n").count == 2)
        }
    }
}
