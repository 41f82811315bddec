import Foundation
import GatewayConfig
import GatewayServer
import Testing

/// docs/configuration.md against the loader: every key the loader asks for is in the
/// manual, and every key the manual names is one the loader asks for, so that the two
/// cannot drift apart.
@Suite struct ConfigurationManualTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// A file with every section, provider, enricher and sink type on, so that the loader
    /// asks for every key it knows (it asks whether or not a key is there).
    static let everything = """
        server:
          host: 127.0.0.1
          rate_limits:
            per_key: { per_second: 10 }
            per_ip: { per_second: 10 }
            open_routes_per_ip: { per_second: 10 }
        storage: { sqlite: { path: /tmp/manual.sqlite }, retention: {} }
        auth: { api_keys: [ { app_id: "1", key: "0123456789abcdef0123", scope: backend } ] }
        providers:
          iad: {}
          adservices: { sdk: { app_id: "1" } }
          skadnetwork: { keys: { aak_production: {}, aak_development: {} } }
          s2s:
            vendor: [singular, appsflyer, adjust]
            vendors:
              singular: { api_key: k, apps: {} }
              appsflyer: { api_key: k }
              adjust: { apps: {} }
        enrichers:
          keyword_lookup:
            client_id: c
            team_id: t
            key_id: k
            private_key: "-----BEGIN EC PRIVATE KEY-----"
            spend: {}
        sinks:
          a: { type: sqlite }
          b: { type: postgres, url: "postgres://u@127.0.0.1/db" }
          c: { type: mixpanel, token: t }
          d: { type: webhook, url: "http://127.0.0.1:9/", secret: "0123456789abcdef0123" }
          e: { type: exec, command: [/bin/cat] }
          f: { type: csv, path: /tmp/manual.csv, columns: [record_id] }
        routes:
          - { sinks: [a], where: { provider: iad } }
        """

    /// The paths the loader asked for, with list indexes as `[]`, sink names as `NAME`, and
    /// vendors as `NAME` unless the manual names that vendor's own key.
    static func asked(documented: Set<String>) -> Set<String> {
        var asked: Set<String> = []
        // The store is one of two blocks: the other's keys are asked for with it.
        let postgres = everything.replacingOccurrences(
            of: "sqlite: { path: /tmp/manual.sqlite }", with: #"postgres: { url: "postgres://u@127.0.0.1/db" }"#)
        for yaml in [everything, postgres] {
            _ = try? ConfigLoader.parse(
                yaml: yaml, file: "everything.yaml", environment: [:], registry: .builtIn,
                keysAsked: { asked.formUnion($0) })
        }
        return Set(
            asked.map { path in
                var path = path.replacingOccurrences(of: #"\[\d+\]"#, with: "[]", options: .regularExpression)
                path = path.replacingOccurrences(
                    of: #"^sinks\.[a-f]\b"#, with: "sinks.NAME", options: .regularExpression)
                if !documented.contains(path) {
                    path = path.replacingOccurrences(
                        of: #"^providers\.s2s\.vendors\.(singular|appsflyer|adjust)\."#,
                        with: "providers.s2s.vendors.NAME.", options: .regularExpression)
                }
                return path
            })
    }

    /// The keys the manual's tables name, as full paths: a key cell is a full path, or one
    /// relative to its section's heading; `a` / `b` and `a` or `b` are two keys.
    static func documented() throws -> Set<String> {
        let text = try String(contentsOf: root.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        var keys: Set<String> = []
        var section = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("#") {
                // `## `storage``, `### `providers.iad``; a heading without a path: the sinks'.
                section = line.split(separator: "`").dropFirst().first.map(String.init) ?? "sinks.NAME"
                continue
            }
            guard line.hasPrefix("| `") else { continue }
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            let names = Self.quoted(cells[0])
            if section == "sinks.NAME", names.count == 1, cells.count > 1, cells[1].hasPrefix("`") {
                // The sink types' table: its second column lists each type's keys.
                for key in Self.quoted(cells[1]) { keys.insert("sinks.NAME.\(key)") }
                continue
            }
            var first: String?
            for name in names {
                let full: String
                if name.contains(".") && name.hasPrefix(section) || name.hasPrefix("sinks.") || name.hasPrefix("routes")
                    || name.hasPrefix("auth.")
                {
                    full = name
                } else if let first, !name.contains(".") {
                    full = (first.split(separator: ".").dropLast().joined(separator: ".")) + "." + name
                } else {
                    full = section + "." + name
                }
                first = first ?? full
                keys.insert(full)
            }
        }
        return keys
    }

    /// The text between backticks.
    static func quoted(_ text: String) -> [String] {
        text.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }
            .map { String($0.element) }
    }

    @Test func everyKeyTheLoaderAsksForIsInTheManual() throws {
        let documented = try Self.documented()
        // An intermediate mapping (`server.rate_limits`) is covered by the keys under it, and a
        // mapping of the user's own names (`vendors.adjust.apps`) covers what is inside it.
        for path in Self.asked(documented: documented).sorted() where !documented.contains(path) {
            let covered = documented.contains {
                $0.hasPrefix(path + ".") || $0.hasPrefix(path + "[]") || path.hasPrefix($0 + ".")
            }
            #expect(covered, "docs/configuration.md does not name `\(path)`")
        }
    }

    @Test func everyKeyTheManualNamesIsOneTheLoaderAsksFor() throws {
        let documented = try Self.documented()
        let asked = Self.asked(documented: documented)
        for key in documented.sorted() where !asked.contains(key) {
            Issue.record("docs/configuration.md names `\(key)`, which the loader does not read")
        }
    }
}
