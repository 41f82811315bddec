import Foundation
import GatewayConfig
import GatewayCore
import GatewayServer
import Testing

/// What a reload from one file to another changes, one line per change, and never a
/// secret's value.
@Suite struct ConfigurationDiffTests {
    static let oldToken = "old-mixpanel-token-0001"
    static let newToken = "new-mixpanel-token-0002"
    static let oldKey = "old-app-key-0123456789"
    static let newKey = "new-app-key-0123456789"
    static let hookSecret = "0123456789abcdef0123456789abcdef"
    static let otherSecret = "fedcba9876543210fedcba9876543210"

    func parse(_ yaml: String, environment: [String: String] = [:]) throws -> GatewayConfiguration {
        try ConfigLoader.parse(yaml: yaml, file: "test.yaml", environment: environment, registry: .builtIn)
    }

    func lines(_ old: String, _ new: String, environment: [String: String] = [:]) throws -> [String] {
        let diff = ConfigurationDiff(
            from: try parse(old, environment: environment), to: try parse(new, environment: environment))
        return diff.lines(appliedLive: GatewayHTTP.reloadedLive)
    }

    static let base = """
        server: { host: 127.0.0.1, port: 8080 }
        storage: { sqlite: { path: /tmp/a.sqlite } }
        auth:
          api_keys:
            - { app_id: "111", key: "\(oldKey)" }
        providers:
          iad: {}
          skadnetwork: { on_invalid_signature: quarantine }
        sinks:
          local: { type: sqlite }
          mp: { type: mixpanel, token: "\(oldToken)", batch_size: 10 }
        routes:
          - sinks: [local]
          - { sinks: [mp], where: { attributed: true } }
        """

    @Test func sameFileHasNoChanges() throws {
        #expect(try lines(Self.base, Self.base).isEmpty)
    }

    @Test func aNamedFileEditedInPlaceIsAChange() throws {
        let model = FileManager.default.temporaryDirectory.appendingPathComponent("model-\(UUID().uuidString).yaml")
        defer { try? FileManager.default.removeItem(at: model) }
        let yaml = Self.base.replacingOccurrences(
            of: "skadnetwork: { on_invalid_signature: quarantine }",
            with: "skadnetwork: { conversion_model: \(model.path) }")
        try "windows:\n  - postback: 0\n    fine:\n      - { values: 0, events: [session] }\n".write(
            to: model, atomically: true, encoding: .utf8)
        let before = try parse(yaml)
        #expect(
            ConfigurationDiff(from: before, to: try parse(yaml)).lines(appliedLive: GatewayHTTP.reloadedLive).isEmpty)
        try "windows:\n  - postback: 0\n    fine:\n      - { values: 0-1, events: [session] }\n".write(
            to: model, atomically: true, encoding: .utf8)
        let lines = ConfigurationDiff(from: before, to: try parse(yaml)).lines(appliedLive: GatewayHTTP.reloadedLive)
        #expect(lines == ["provider skadnetwork: changed conversion_model: the file's contents changed"])

        // A file the gateway writes (a sink's database) changes all the time: not a change.
        let database = model.deletingPathExtension().appendingPathExtension("sqlite")
        defer { try? FileManager.default.removeItem(at: database) }
        let sink = Self.base.replacingOccurrences(
            of: "local: { type: sqlite }", with: "local: { type: sqlite, path: \(database.path) }")
        try "one".write(to: database, atomically: true, encoding: .utf8)
        let written = try parse(sink)
        try "two".write(to: database, atomically: true, encoding: .utf8)
        #expect(
            ConfigurationDiff(from: written, to: try parse(sink)).lines(appliedLive: GatewayHTTP.reloadedLive).isEmpty)
    }

    @Test func sinksAddedRemovedAndChangedWithoutTheirSecrets() throws {
        let new = Self.base
            .replacingOccurrences(
                of: "mp: { type: mixpanel, token: \"\(Self.oldToken)\", batch_size: 10 }",
                with: "mp: { type: mixpanel, token: \"\(Self.newToken)\", batch_size: 20 }\n"
                    + "  hook: { type: webhook, url: \"https://hooks.example.com/in?sig=abc\", "
                    + "secret: \"\(Self.hookSecret)\" }"
            )
            .replacingOccurrences(of: "  local: { type: sqlite }\n", with: "")
            .replacingOccurrences(of: "  - sinks: [local]", with: "  - sinks: [hook]")
        let lines = try lines(Self.base, new)
        #expect(lines.contains("sink hook: added (webhook)"), "\(lines)")
        #expect(lines.contains("sink local: removed (sqlite)"), "\(lines)")
        #expect(
            lines.contains("sink mp: changed batch_size: 10 -> 20; token: secret changed"),
            "\(lines)")
        #expect(lines.contains { $0.hasPrefix("route added: all records but test payloads") && $0.contains("hook") })
        #expect(lines.contains { $0.hasPrefix("route removed: ") && $0.contains("-> local") })
        Self.expectNoSecrets(lines)
    }

    @Test func aURLsCredentialsAndQueryAreSecret() throws {
        let old = Self.base + "\n  - { sinks: [hook] }"
        let sinks = "  local: { type: sqlite }\n"
        func hook(_ url: String, _ secret: String = Self.hookSecret) -> String {
            old.replacingOccurrences(
                of: sinks, with: sinks + "  hook: { type: webhook, url: \"\(url)\", secret: \"\(secret)\" }\n")
        }
        let before = hook("https://hooks.example.com/in?sig=abc")
        let moved = try lines(before, hook("https://hooks2.example.com/in?sig=abc"))
        #expect(
            moved == [
                "sink hook: changed url: https://hooks.example.com/… -> https://hooks2.example.com/…"
            ], "\(moved)")
        let requeried = try lines(before, hook("https://hooks.example.com/in?sig=xyz", Self.otherSecret))
        #expect(
            requeried == [
                "sink hook: changed secret: secret changed; url: changed (its path, query or credentials, not shown)"
            ],
            "\(requeried)")
        Self.expectNoSecrets(moved + requeried)
    }

    /// A program's command line may carry a credential (`--password=…`): its change is said,
    /// its words are not.
    @Test func anExecSinksCommandLineIsNeverShown() throws {
        let sinks = "  local: { type: sqlite }\n"
        func exec(_ word: String) -> String {
            Self.base.replacingOccurrences(
                of: sinks, with: sinks + "  ex: { type: exec, command: [\"/bin/echo\", \"--password=\(word)\"] }\n")
        }
        let changed = try lines(exec("EXECSECRET-1111"), exec("EXECSECRET-2222"))
        #expect(
            changed == ["sink ex: changed command[1]: secret changed"], "\(changed)")
        #expect(!changed.joined().contains("EXECSECRET"))
    }

    @Test func valuesFromTheEnvironmentAreNeverShown() throws {
        let old = Self.base.replacingOccurrences(of: "batch_size: 10", with: "batch_size: \"${BATCH:-10}\"")
        let lines = try lines(old, old.replacingOccurrences(of: "${BATCH:-10}", with: "${BATCH:-30}"))
        #expect(
            lines == [
                "sink mp: changed batch_size: changed (its value comes from the environment, not shown)"
            ], "\(lines)")
    }

    /// Every provider's change applies live: its routes are made again with it.
    @Test func providersEnabledDisabledAndChanged() throws {
        let new = Self.base
            .replacingOccurrences(of: "  iad: {}\n", with: "  iad: { enabled: false }\n  adservices: {}\n")
            .replacingOccurrences(of: "on_invalid_signature: quarantine", with: "on_invalid_signature: reject")
        let lines = try lines(Self.base, new)
        #expect(
            lines == [
                "provider adservices: enabled (adservices)",
                "provider iad: disabled (iad)",
                "provider skadnetwork: changed on_invalid_signature: quarantine -> reject",
            ], "\(lines)")
    }

    @Test func keysAreCountedPerAppAndApplyLive() throws {
        let new = Self.base.replacingOccurrences(
            of: "    - { app_id: \"111\", key: \"\(Self.oldKey)\" }",
            with: "    - { app_id: \"111\", key: \"\(Self.newKey)\" }\n"
                + "    - { app_id: \"222\", key: \"\(Self.oldKey)x\" }")
        let lines = try lines(Self.base, new)
        #expect(lines == ["auth.api_keys app 111: 1 added, 1 removed", "auth.api_keys app 222: 1 added, 0 removed"])
        Self.expectNoSecrets(lines)
    }

    /// Rate limits reload live; the listen address and the store never do.
    @Test func rateLimitsServerAndStorage() throws {
        let new = Self.base
            .replacingOccurrences(
                of: "server: { host: 127.0.0.1, port: 8080 }",
                with: "server: { host: 0.0.0.0, port: 9090, log_level: debug, "
                    + "rate_limits: { per_key: { per_second: 10, burst: 20 }, open_routes_per_ip: { per_second: 0 } } }"
            )
            .replacingOccurrences(of: "/tmp/a.sqlite", with: "/tmp/b.sqlite")
        let lines = try lines(Self.base, new)
        #expect(
            lines == [
                "server.rate_limits.per_key: off -> 10/s, burst 20",
                "server.rate_limits.open_routes_per_ip: 100/s, burst 1000 -> off",
                "server.host: 127.0.0.1 -> 0.0.0.0 (takes effect at the next start)",
                "server.port: 8080 -> 9090 (takes effect at the next start)",
                "server.log_level: info -> debug",
                "storage.sqlite.path: /tmp/a.sqlite -> /tmp/b.sqlite (takes effect at the next start)",
            ], "\(lines)")
    }

    @Test func aPostgresPasswordIsSecret() throws {
        let old = Self.base.replacingOccurrences(
            of: "storage: { sqlite: { path: /tmp/a.sqlite } }",
            with: "storage: { postgres: { url: \"postgres://gw:pw-one-secret@db:5432/gw\" } }")
        let lines = try lines(old, old.replacingOccurrences(of: "pw-one-secret", with: "pw-two-secret"))
        #expect(lines == ["storage.postgres.url: secret changed (takes effect at the next start)"])
        let moved = try self.lines(Self.base, old)
        #expect(
            moved == [
                "storage: sqlite /tmp/a.sqlite -> postgres postgres://gw@db:5432/gw (takes effect at the next start)"
            ])
        #expect(!(lines + moved).joined().contains("pw-"))
        // How long it waits is no secret, and changing it changes no credential.
        let patient = try self.lines(
            old, old.replacingOccurrences(of: "5432/gw\"", with: "5432/gw\", timeout_ms: 30000"))
        #expect(patient == ["storage.postgres.timeout_ms: 10000 -> 30000 (takes effect at the next start)"])
    }

    static func s2s(_ vendor: String, callbackSecret: String? = nil) -> String {
        base.replacingOccurrences(
            of: "  iad: {}\n",
            with: """
                  iad: {}
                  s2s:
                    vendor: \(vendor)
                    vendors:
                      singular: { api_key: "singular-key-0123456789" }
                      appsflyer: { api_key: "appsflyer-key-0123456789"\(callbackSecret.map { ", callback_secret: \($0)" } ?? "") }

                """)
    }

    /// A vendor switch: its provider's settings and the vendor's own destination and
    /// route, all swapped live.
    @Test func switchingTheS2SVendor() throws {
        let lines = try lines(Self.s2s("singular"), Self.s2s("appsflyer"))
        #expect(lines.contains("provider s2s: changed vendor: singular -> appsflyer"), "\(lines)")
        #expect(lines.contains("sink s2s.appsflyer: added (s2s)"), "\(lines)")
        #expect(lines.contains("sink s2s.singular: removed (s2s)"), "\(lines)")
        #expect(lines.contains { $0.hasPrefix("route added: ") && $0.hasSuffix("-> s2s.appsflyer") }, "\(lines)")
        #expect(!lines.joined().contains("key-0123456789"))
    }

    /// A change that adds a route (a vendor's callbacks) applies live too, without
    /// showing the callback's secret.
    @Test func anS2SChangeThatAddsARouteAppliesLive() throws {
        let lines = try lines(Self.s2s("singular"), Self.s2s("appsflyer", callbackSecret: Self.hookSecret))
        #expect(lines.count >= 3 && !lines.contains { $0.hasSuffix("(takes effect at the next start)") }, "\(lines)")
        #expect(!lines.joined().contains(Self.hookSecret))
    }

    static func expectNoSecrets(_ lines: [String]) {
        let text = lines.joined(separator: "\n")
        for secret in [oldToken, newToken, oldKey, newKey, hookSecret, otherSecret, "pw@", "sig="] {
            #expect(!text.contains(secret), "\(secret) in \(text)")
        }
    }
}
