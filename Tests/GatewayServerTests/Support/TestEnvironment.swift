import Foundation
import GatewayConfig
import GatewayCore
import GatewayServer
import GRDB

/// A temporary folder with a config file and an SQLite path, removed at the end.
struct TestEnvironment {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    var databasePath: String { directory.appendingPathComponent("gateway.sqlite").path }

    /// A config whose storage is this folder's SQLite file.
    func yaml(port: Int = 0, paused: Bool = false, logLevel: String = "warning") -> String {
        """
        server: { host: 127.0.0.1, port: \(port), max_body_bytes: 65536, log_level: \(logLevel) }
        storage: { sqlite: { path: \(databasePath), durability: normal } }
        providers:
          iad: { enabled: true }
        sinks:
          local: { type: sqlite, paused: \(paused), backoff_initial_ms: 10, backoff_max_ms: 100 }
        routes:
          - sinks: [local]
        """
    }

    func configuration(paused: Bool = false) throws -> GatewayConfiguration {
        try ConfigLoader.parse(yaml: yaml(paused: paused), file: "test.yaml", environment: [:], registry: .builtIn)
    }

    func writeConfig(port: Int = 0, paused: Bool = false) throws -> String {
        let path = directory.appendingPathComponent("config.yaml").path
        // The child process announces its port in an info line.
        try yaml(port: port, paused: paused, logLevel: "info").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func remove() {
        try? FileManager.default.removeItem(at: directory)
    }

    /// Record ids in the SQLite sink's table.
    func deliveredRecordIDs() throws -> [String] {
        let queue = try DatabaseQueue(path: databasePath)
        return try queue.read { db in
            guard try db.tableExists("attribution_records") else { return [] }
            return try String.fetchAll(db, sql: "SELECT record_id FROM attribution_records")
        }
    }

    /// Polls until `condition` holds, for at most `seconds`. A bound, not a speed claim.
    func eventually(seconds: Double = 60, _ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return try await condition()
    }
}

/// Real-shaped iAd payloads, as `requestAttributionDetails` hands them to an app.
enum IAdPayloads {
    static func attributed(user: String, appID: String = "1234567890") -> String {
        """
        {"app_id":"\(appID)","app_user_id":"\(user)","Version3.1":{
          "iad-attribution":"true","iad-org-id":"40669820","iad-org-name":"Mindful Apps Inc.",
          "iad-campaign-id":"542370539","iad-campaign-name":"US Search - Meditation",
          "iad-adgroup-id":"542317095","iad-adgroup-name":"Exact - Core",
          "iad-keyword-id":"87675432","iad-keyword":"meditation app","iad-keyword-matchtype":"Exact",
          "iad-ad-id":"542317136","iad-country-or-region":"US","iad-conversion-type":"Download",
          "iad-click-date":"2020-08-04T17:18:07Z","iad-conversion-date":"2020-08-04T17:19:41.250Z",
          "iad-purchase-date":"2020-08-04T17:19:41Z"}}
        """
    }
}
