import Foundation
import GatewayConfig
import GatewayCore
import GatewayServer
import GatewaySinks
import Testing

/// config.yaml → checked configuration, with the built-in plugins: every problem reported
/// with its YAML path and line, and the settings a user writes landing where the gateway
/// reads them.
@Suite struct ConfigLoaderTests {
    func parse(_ yaml: String, environment: [String: String] = [:]) throws(ConfigError) -> GatewayConfiguration {
        try ConfigLoader.parse(yaml: yaml, file: "test.yaml", environment: environment, registry: .builtIn)
    }

    /// The issues of a file that must not load (none when it loads).
    func problems(_ yaml: String, environment: [String: String] = [:]) -> [ConfigIssue] {
        do {
            _ = try parse(yaml, environment: environment)
            return []
        } catch {
            return error.issues
        }
    }

    /// The one issue reported at `path`.
    func problem(at path: String, in issues: [ConfigIssue]) throws -> ConfigIssue {
        let matching = issues.filter { $0.path == path }
        #expect(matching.count == 1, "issues at \(path): \(issues)")
        return try #require(matching.first, "no issue at \(path) among \(issues)")
    }

    static let oneSink = """
        sinks:
          local: { type: sqlite, path: /tmp/unused.sqlite }
        """

    // MARK: the repository's own file

    @Test func theRepositoryConfigLoadsWithItsDocumentedDefaults() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let path = root.appendingPathComponent("config.yaml").path
        let config = try ConfigLoader.load(path: path, environment: [:], registry: .builtIn)
        #expect(config.file == path)
        #expect(config.server.host == "127.0.0.1")
        #expect(config.server.port == 8080)
        // Relative to the file, wherever the command runs.
        #expect(config.storage.sqlitePath == root.appendingPathComponent("data/gateway.sqlite").path)
        #expect(config.storage.durability == "full")
        #expect(config.providers.map(\.typeName) == ["adservices", "iad", "skadnetwork", "s2s"])
        let local = try #require(config.sinks.first { $0.name == "local" })
        #expect(local.prepared.typeName == "sqlite")
        // Every route names a defined sink, and the local table gets everything.
        let names = Set(config.sinks.map(\.name))
        #expect(config.routes.allSatisfy { Set($0.sinks).isSubset(of: names) })
        #expect(config.routes.contains(Route(sinks: ["local"])))

        // Its ${VAR:-default} values follow the environment.
        let moved = try ConfigLoader.load(
            path: path, environment: ["GATEWAY_PORT": "9091", "GATEWAY_DB": "/srv/gw.sqlite"], registry: .builtIn)
        #expect(moved.server.port == 9091)
        #expect(moved.storage.sqlitePath == "/srv/gw.sqlite")
    }

    /// A store named relative to the working directory was another store for `import` or
    /// `report` run from another folder (they filled or read it, and exited 0), and an
    /// empty one for `serve` started by systemd in `/`.
    @Test func everyFileTheConfigNamesIsRelativeToIt() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("etc-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("config.yaml").path
        try """
        storage: { sqlite: { path: ./data/gw.sqlite } }
        sinks:
          local: { type: sqlite }
          elsewhere: { type: sqlite, path: ../sinks/rows.sqlite }
          absolute: { type: sqlite, path: /srv/rows.sqlite }
        """.write(toFile: path, atomically: true, encoding: .utf8)
        let config = try ConfigLoader.load(path: path, environment: [:], registry: .builtIn)
        #expect(config.storage.sqlitePath == folder.appendingPathComponent("data/gw.sqlite").path)
        let elsewhere = folder.deletingLastPathComponent().appendingPathComponent("sinks/rows.sqlite").path
        #expect(
            config.sinks.map(\.prepared.summary) == [
                "table attribution_records in \(config.storage.sqlitePath)",
                "table attribution_records in \(elsewhere)",
                "table attribution_records in /srv/rows.sqlite",
            ])

        // With no storage section, the default is the file's folder's data/gateway.sqlite.
        try "sinks: { local: { type: sqlite } }".write(toFile: path, atomically: true, encoding: .utf8)
        let defaults = try ConfigLoader.load(path: path, environment: [:], registry: .builtIn)
        #expect(defaults.storage.sqlitePath == folder.appendingPathComponent("data/gateway.sqlite").path)
    }

    @Test func anUnreadableFileIsAnIssueNotACrash() {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("missing-\(UUID()).yaml").path
        do {
            _ = try ConfigLoader.load(path: path, environment: [:], registry: .builtIn)
            Issue.record("a missing file loaded")
        } catch {
            #expect(error.issues.count == 1)
            #expect(error.issues.first?.file == path)
            #expect(error.issues.first?.message.contains("cannot read") == true)
        }
    }

    // MARK: problems, all at once, each with its line

    @Test func anUnknownKeyAndAWrongTypeAreBothReportedWithTheirLines() throws {
        let issues = problems(
            """
            server:
              host: 0.0.0.0
              port: abc
            storage:
              sqlite:
                path: /tmp/x.sqlite
                colour: blue
            """)
        #expect(issues.count == 2, "\(issues)")

        let port = try problem(at: "server.port", in: issues)
        #expect(port.line == 3)
        #expect(port.column == 9)
        #expect(port.message == "expected an integer, found 'abc'")
        #expect(port.file == "test.yaml")
        #expect(port.description == "test.yaml:3:9: server.port: expected an integer, found 'abc'")

        let colour = try problem(at: "storage.sqlite.colour", in: issues)
        #expect(colour.line == 7)
        #expect(colour.message.hasPrefix("unknown key 'colour'"))
    }

    /// A header the HTTP client refuses failed every delivery for good; a value with a
    /// line break would start another header. Named at load, the value never echoed.
    @Test func aWebhookHeaderHTTPWouldRefuseIsNamedAtLoad() {
        let yaml = """
            sinks:
              hook:
                type: webhook
                url: https://hooks.example.com/in
                secret: a-secret-of-sixteen-plus
                headers: { "X-Team Name": growth, X-Token: "tok-123\\r\\nX-Evil: 1", X-Fine: "ok value" }
            """
        let text = problems(yaml).map(\.description).joined(separator: "\n")
        #expect(text.contains("`X-Team Name` is not an HTTP header name"), "\(text)")
        #expect(text.contains("sinks.hook.headers.X-Token") && text.contains("holds a line break"), "\(text)")
        #expect(!text.contains("tok-123") && !text.contains("X-Fine"), "\(text)")
    }

    /// `<<: *defaults` shares settings between sinks, as YAML has it; it was refused as an
    /// unknown key `<<`, though the README said anchors read as YAML has them.
    @Test func aMergeKeyBringsInItsMappingUnderTheKeysWrittenOut() throws {
        let yaml = """
            sinks:
              eu: &hook { type: webhook, url: "https://eu.example.com/in", secret: a-secret-of-sixteen-plus, batch_size: 7 }
              us:
                <<: *hook
                url: "https://us.example.com/in"
              both:
                <<: [{ batch_size: 3 }, *hook]
            """
        let configuration = try parse(yaml)
        let sinks = Dictionary(uniqueKeysWithValues: configuration.sinks.map { ($0.name, $0) })
        #expect(sinks["us"]?.delivery.batchSize == 7)
        #expect(
            sinks["us"]?.prepared.summary.contains("us.example.com") == true, "\(sinks["us"]?.prepared.summary ?? "")")
        #expect(sinks["both"]?.delivery.batchSize == 3)
        #expect(sinks["both"]?.prepared.summary.contains("eu.example.com") == true)
        // Anything but mappings under `<<` stays an unknown key.
        #expect(problems("sinks:\n  x: { type: sqlite, <<: 5 }\n").contains { $0.description.contains("'<<'") })
    }

    /// A misspelt column was an empty column for good, a repeated one a wasted one.
    @Test func theCSVSinksColumnsMustBeRecordFieldsEachOnce() {
        let issues = problems(
            "sinks:\n  export: { type: csv, path: out.csv, columns: [campain_name, keyword, keyword] }\n")
        let text = issues.map(\.description).joined(separator: "\n")
        #expect(text.contains("`campain_name` is not a record field"), "\(text)")
        #expect(text.contains("`keyword` is listed twice"), "\(text)")
        #expect(
            problems("sinks:\n  export: { type: csv, path: out.csv, columns: [campaign_name, record_id] }\n").isEmpty)
    }

    @Test func anUnknownSectionIsReportedOnTheLineOfItsKey() throws {
        // The unknown key holds a mapping: the issue must point at `limits:`, not inside it.
        let issues = problems(
            """
            server:
              port: 8080
            limits:
              rate: 10
            """)
        let limits = try problem(at: "limits", in: issues)
        #expect(limits.message.hasPrefix("unknown key 'limits'"))
        #expect(limits.line == 3)
    }

    @Test func aDuplicateKeyIsReportedWithItsLine() throws {
        // Two sinks of the same name, or a key written twice, must be findable in a long file.
        let issues = problems(
            """
            server:
              port: 8080
              host: 0.0.0.0
              port: 9090
            """)
        let duplicate = try #require(issues.first)
        #expect(issues.count == 1, "\(issues)")
        #expect(duplicate.message.contains("port"))
        #expect([2, 4].contains(duplicate.line), "reported at line \(duplicate.line)")
    }

    @Test(arguments: [
        ("server:\n  prot: 8080", "server.prot", "port"),
        ("server:\n  log_levle: debug", "server.log_levle", "log_level"),
        ("sinkss:\n  local: { type: sqlite }", "sinkss", "sinks"),
        ("sinks:\n  local: { type: sqlite, batch_sise: 10 }", "sinks.local.batch_sise", "batch_size"),
        (
            "sinks:\n  local: { type: sqlite }\nroutes:\n  - sinks: [local]\n    wehre: { attributed: true }",
            "routes[0].wehre", "where"
        ),
    ])
    func aTypoGetsADidYouMean(yaml: String, path: String, intended: String) throws {
        let issue = try problem(at: path, in: problems(yaml))
        #expect(issue.message.hasSuffix(", did you mean '\(intended)'?"), "\(issue.message)")
    }

    /// A `per_key` limit counts backend keys only: with none, it limits nothing, and the
    /// operator is told so, at the key's line, while the file still loads.
    @Test func aPerKeyLimitWithoutABackendKeyIsWarnedAbout() throws {
        let limit = """
            server:
              rate_limits:
                per_key: { per_second: 10 }
            """
        let appKeyOnly = try parse(
            limit + "\nauth: { api_keys: [ { app_id: \"1\", key: \"appkey-0123456789abcdef\" } ] }\n" + Self.oneSink)
        let warning = try #require(appKeyOnly.warnings.first { $0.path == "server.rate_limits.per_key" })
        #expect(warning.line == 3)
        #expect(warning.message.contains("limits nothing"))
        let backend = try parse(
            limit + "\nauth: { api_keys: [ { app_id: \"1\", key: \"backendkey-0123456789ab\", scope: backend } ] }\n"
                + Self.oneSink)
        #expect(backend.warnings.isEmpty)
    }

    /// A block of its own for anchors, as Compose files keep them: an `x-` key is read by
    /// nothing and refused by nothing, and another unknown top-level key still is.
    @Test func anXKeyHoldsAnchorsForTheRestOfTheFile() throws {
        let config = try parse(
            """
            x-delivery: &delivery { batch_size: 50, max_attempts: 20 }
            sinks:
              local: { <<: *delivery, type: sqlite, path: /tmp/unused.sqlite }
            """)
        let local = try #require(config.sinks.first { $0.name == "local" })
        #expect(local.delivery.batchSize == 50 && local.delivery.maxAttempts == 20)
        let unknown = problems("defaults: &d { batch_size: 50 }\n" + Self.oneSink)
        #expect(unknown.map(\.path) == ["defaults"])
    }

    // MARK: storage

    @Test func aPostgresURLFromTheEnvironmentChoosesThePostgresStore() throws {
        let yaml = "storage:\n  postgres: { url: \"${DATABASE_URL}\", pool_size: 4 }\n" + Self.oneSink
        let config = try parse(
            yaml, environment: ["DATABASE_URL": "postgres://gw:s%40cret@db.internal:6543/attribution"])
        let postgres = try #require(config.storage.postgres)
        #expect(postgres.url.host == "db.internal")
        #expect(postgres.url.port == 6543)
        #expect(postgres.url.user == "gw")
        #expect(postgres.url.password == "s@cret")
        #expect(postgres.url.database == "attribution")
        #expect(postgres.url.sslMode == "disable")
        #expect(postgres.poolSize == 4)
        #expect(postgres.leaseSeconds == 60)
        #expect(postgres.url.timeout == .seconds(10))
        // Printed (a log line, an error), the URL leaves its password out.
        #expect("\(postgres.url)" == "postgres://gw@db.internal:6543/attribution")
    }

    /// `timeout_ms` goes with the URL to every part that connects: the store and the
    /// keyword names' and spend's tables.
    @Test func howLongTheGatewayWaitsForPostgresIsSetWithTheURL() throws {
        let config = try parse(
            "storage:\n  postgres: { url: \"postgres://gw@db/gw\", timeout_ms: 30000 }\n" + Self.oneSink)
        #expect(config.storage.postgres?.url.timeout == .seconds(30))
        let bad = problems("storage:\n  postgres: { url: \"postgres://gw@db/gw\", timeout_ms: 50 }\n" + Self.oneSink)
        #expect(try problem(at: "storage.postgres.timeout_ms", in: bad).message.contains("1000"))
    }

    @Test func retentionKeepsEverythingUnlessToldHowManyDays() throws {
        #expect(try parse(Self.oneSink).storage.rawDays == 0)
        let config = try parse("storage:\n  retention: { raw_days: 30 }\n" + Self.oneSink)
        #expect(config.storage.rawDays == 30)
        let bad = problems("storage:\n  retention: { raw_days: -1 }\n" + Self.oneSink)
        #expect(try problem(at: "storage.retention.raw_days", in: bad).message.contains("0"))
        let both = try parse("storage:\n  retention: { raw_days: 30, records_days: 400 }\n" + Self.oneSink)
        #expect(both.storage.recordsDays == 400 && both.storage.rawDays == 30)
        #expect(try parse(Self.oneSink).storage.recordsDays == 0)
    }

    @Test func aURLThatIsNotPostgresIsRefusedWithoutEchoingIt() throws {
        let bad = problems("storage:\n  postgres: { url: \"mysql://root:hunter2@db/x\" }\n" + Self.oneSink)
        let issue = try problem(at: "storage.postgres.url", in: bad)
        #expect(issue.message.contains("postgres://"))
        #expect(!issue.message.contains("hunter2"))
        let tls = problems("storage:\n  postgres: { url: \"postgres://u@db/x?sslmode=maybe\" }\n" + Self.oneSink)
        #expect(try problem(at: "storage.postgres.url", in: tls).message.contains("sslmode"))
        // The other keys are still read and checked: a bad URL does not make them unknown.
        let both = problems(
            "storage:\n  postgres: { url: \"postgres://db:notaport/x\", pool_size: 8, lease_s: 1 }\n" + Self.oneSink)
        #expect(both.map(\.path).sorted() == ["storage.postgres.lease_s", "storage.postgres.url"], "\(both)")
    }

    @Test func oneStoreIsNamedNotTwo() throws {
        let yaml = """
            storage:
              sqlite: { path: ./data/gateway.sqlite }
              postgres: { url: "postgres://u@127.0.0.1/db" }

            """ + Self.oneSink
        #expect(
            try problem(at: "storage.postgres", in: problems(yaml)).message
                == "name one store: sqlite or postgres, not both")
    }

    @Test func anAPIKeyEndingInANewlineIsRefusedRatherThanNeverMatching() throws {
        // A `|` block keeps its final newline; requests' keys are trimmed before comparing.
        let yaml = "auth:\n  api_keys:\n    - app_id: \"1\"\n      key: |\n        0123456789abcdef0123\n"
        let issue = try problem(at: "auth.api_keys[0].key", in: problems(yaml))
        #expect(issue.message == "must not begin or end with white space")
    }

    @Test func operatorKeysAreCheckedAsAPIKeysAndNeverAlsoOne() throws {
        let appKey = "key-for-app-1234567890"
        let yaml = """
            auth:
              api_keys: [ { app_id: "1", key: "\(appKey)" } ]
              operator_keys: [ "\(appKey)", "short", "operator-key-0123456789" ]
            """
        let issues = problems(yaml)
        #expect(issues.map(\.path) == ["auth.operator_keys", "auth.operator_keys"], "\(issues)")
        #expect(issues.first?.message == "entry 1 is also listed in auth.api_keys; give operators a key of their own")
        #expect(issues.last?.message == "entry 2 must be at least 16 characters")
        #expect(!issues.contains { $0.message.contains(appKey) })

        let loaded = try parse("auth:\n  operator_keys: [ \"${OPERATOR_KEY}\" ]", environment: ["OPERATOR_KEY": appKey])
        #expect(loaded.auth.operatorKeys == [SHA256Hex.digest(appKey)] && loaded.auth.apiKeys.isEmpty)
        // Unset, an optional key leaves the operator routes closed rather than failing the file.
        #expect(try parse("auth:\n  operator_keys: [ \"${OPERATOR_KEY:-}\" ]").auth.operatorKeys.isEmpty)
    }

    @Test func aKeyLikeNothingKnownGetsNoSuggestion() throws {
        let issue = try problem(at: "server.flavour", in: problems("server:\n  flavour: vanilla"))
        #expect(issue.message == "unknown key 'flavour'")
    }

    @Test func aWrongValueInAChoiceIsAnError() throws {
        let issue = try problem(at: "server.log_level", in: problems("server:\n  log_level: verbose"))
        #expect(issue.message.contains("found 'verbose'"))
        #expect(issue.line == 2)
    }

    // MARK: sinks and routes

    @Test func aRouteToAnUndefinedSinkNamesTheRoutesSinks() throws {
        let issues = problems(
            """
            \(Self.oneSink)
            routes:
              - sinks: [local]
              - sinks: [local, warehouse]
            """)
        #expect(issues.count == 1, "\(issues)")
        let issue = try problem(at: "routes[1].sinks", in: issues)
        #expect(issue.message.contains("'warehouse'"))
        #expect(issue.message.contains("local"))
        #expect(issue.line == 5)

        let first = try problem(
            at: "routes[0].sinks", in: problems("\(Self.oneSink)\nroutes:\n  - sinks: [warehouse]"))
        #expect(first.message.contains("'warehouse'"))
    }

    @Test func aRouteToADeclaredSinkWithErrorsOfItsOwnIsNotReportedAsMissing() throws {
        let issues = problems(
            """
            sinks:
              hook: { type: webhook, url: "http://127.0.0.1:9999/hook" }
            routes:
              - sinks: [hook]
            """)
        #expect(issues.map(\.path) == ["sinks.hook.secret"], "\(issues)")
    }

    @Test func aWebhooksSummaryShowsItsPortButNotItsPathOrQuery() throws {
        let configuration = try parse(
            """
            sinks:
              hook: { type: webhook, url: "https://hooks.example.com:8443/services/T0/B0/s3cr3t?token=t0k3n", secret: "0123456789abcdef0123456789abcdef" }
            """)
        let summary = try #require(configuration.sinks.first?.prepared.summary)
        #expect(summary.hasPrefix("POST https://hooks.example.com:8443/…,"), "\(summary)")
        #expect(!summary.contains("t0k3n") && !summary.contains("s3cr3t"))
    }

    /// Credentials in a webhook's URL were never sent (the HTTP client takes none from a
    /// URL): a receiver that needs them refused every batch, into the dead letters.
    @Test func aWebhookURLWithCredentialsIsRefusedPointingAtHeaders() throws {
        let issue = try problem(
            at: "sinks.hook.url",
            in: problems(
                """
                sinks:
                  hook: { type: webhook, url: "https://user:pw@hooks.example.com/in", secret: "0123456789abcdef0123456789abcdef" }
                """))
        #expect(issue.message.contains("headers"), "\(issue)")
        #expect(!issue.message.contains("pw@"), "\(issue)")
    }

    @Test func aRouteWithoutSinksIsAnError() throws {
        let issue = try problem(
            at: "routes[0]", in: problems("\(Self.oneSink)\nroutes:\n  - where: { attributed: true }"))
        #expect(issue.message.contains("at least one sink"))
    }

    @Test func anUnknownSinkTypeIsAnErrorListingTheKnownOnes() throws {
        let issues = problems(
            """
            sinks:
              stream:
                type: kafka
            """)
        let issue = try problem(at: "sinks.stream.type", in: issues)
        #expect(issue.message.hasPrefix("unknown sink type 'kafka'"))
        #expect(issue.message.contains("sqlite"))
        #expect(issue.message.contains("webhook"))
        #expect(issue.line == 3)
    }

    /// A typo in `type` does not hide the sink's other mistakes: they are checked as the
    /// type it most likely meant.
    @Test func aMistypedSinkTypeStillHasItsOtherMistakesListed() throws {
        let issues = problems(
            """
            sinks:
              hook:
                type: webhok
                secret: short
                batch_sise: 10
            """)
        let type = try problem(at: "sinks.hook.type", in: issues)
        #expect(type.message.hasSuffix("did you mean 'webhook'?"))
        _ = try problem(at: "sinks.hook.url", in: issues)
        _ = try problem(at: "sinks.hook.batch_sise", in: issues)
    }

    @Test func aSinkWithoutATypeIsAnError() throws {
        let issue = try problem(at: "sinks.local.type", in: problems("sinks:\n  local: { batch_size: 5 }"))
        #expect(issue.message == "is required")
    }

    @Test func deliveryKeysLandInTheSinksDeliverySettings() throws {
        let config = try parse(
            """
            sinks:
              local:
                type: sqlite
                path: /tmp/unused.sqlite
                batch_size: 50
                max_attempts: 4
                backoff_initial_ms: 250
                backoff_max_ms: 8000
                paused: true
              other: { type: sqlite, path: /tmp/unused2.sqlite }
            """)
        #expect(config.sinks.map(\.name) == ["local", "other"])
        #expect(
            config.sinks[0].delivery
                == DeliverySettings(
                    batchSize: 50, maxAttempts: 4, backoffInitial: .milliseconds(250), backoffMax: .milliseconds(8000),
                    paused: true))
        // Keys left out keep the documented defaults.
        #expect(config.sinks[1].delivery == DeliverySettings())
        #expect(DeliverySettings().batchSize == 100)
        #expect(DeliverySettings().maxAttempts == 1000)
        #expect(DeliverySettings().backoffInitial == .seconds(1))
        #expect(DeliverySettings().backoffMax == .seconds(300))
        #expect(!DeliverySettings().paused)
    }

    @Test func deliveryKeysAreChecked() throws {
        let issues = problems(
            """
            sinks:
              local:
                type: sqlite
                batch_size: 0
                max_attempts: many
                paused: sometimes
              other:
                type: sqlite
                backoff_initial_ms: 5000
                backoff_max_ms: 1000
            """)
        #expect(try problem(at: "sinks.local.batch_size", in: issues).line == 4)
        #expect(try problem(at: "sinks.local.max_attempts", in: issues).message.contains("'many'"))
        #expect(try problem(at: "sinks.local.paused", in: issues).message.contains("'sometimes'"))
        #expect(try problem(at: "sinks.other.backoff_max_ms", in: issues).line == 10)
    }

    @Test func withoutRoutesEveryRecordGoesToEverySink() throws {
        let config = try parse(
            """
            sinks:
              first: { type: sqlite, path: /tmp/a.sqlite }
              second: { type: sqlite, path: /tmp/b.sqlite }
            """)
        #expect(config.routes == [Route(sinks: ["first", "second"])])
        #expect(RecordRouter(routes: config.routes).sinks(for: Self.anyRecord) == ["first", "second"])
        #expect(try parse("server: { port: 1 }").routes.isEmpty)
    }

    static let anyRecord = AttributionRecord(
        provider: "iad", kind: .event, dedupeKey: "k", receivedAt: Date(timeIntervalSince1970: 0))

    @Test func whereConditionsParseIntoARecordFilter() throws {
        let config = try parse(
            """
            sinks:
              local: { type: sqlite, path: /tmp/a.sqlite }
              paid: { type: sqlite, path: /tmp/b.sqlite }
            routes:
              - sinks: [local]
              - sinks: [paid]
                where:
                  provider: iad
                  app_id: [1234567890, "987"]
                  attributed: true
                  kind: [install, reinstall]
                  is_test: false
              - sinks: paid
                where: { kind: purchase }
            """)
        #expect(
            config.routes == [
                Route(sinks: ["local"]),
                Route(
                    sinks: ["paid"],
                    filter: RecordFilter(
                        providers: ["iad"], appIDs: ["1234567890", "987"], attributed: true,
                        kinds: [.install, .reinstall], isTest: false)),
                Route(sinks: ["paid"], filter: RecordFilter(kinds: [.purchase])),
            ])
    }

    @Test func anUnknownKindOrConditionIsAnError() throws {
        let issues = problems(
            """
            \(Self.oneSink)
            routes:
              - sinks: [local]
                where:
                  kind: [install, instal]
                  country: US
            """)
        let kind = try problem(at: "routes[0].where.kind", in: issues)
        #expect(kind.message.hasPrefix("unknown kind 'instal'"))
        #expect(kind.message.contains("reinstall"))
        #expect(kind.line == 6)
        #expect(try problem(at: "routes[0].where.country", in: issues).message.hasPrefix("unknown key 'country'"))
    }

    // MARK: providers

    @Test func anUnknownProviderIsAnError() throws {
        let issues = problems(
            """
            providers:
              iad: { enabled: true }
              adservicez: { enabled: true }
            \(Self.oneSink)
            routes:
              - sinks: [local]
                where: { provider: [iad, skan] }
            """)
        let provider = try problem(at: "providers.adservicez", in: issues)
        #expect(provider.message.hasPrefix("unknown provider 'adservicez' (did you mean 'adservices'?)"))
        #expect(provider.message.contains("iad"))
        #expect(provider.line == 3)
        #expect(try problem(at: "routes[0].where.provider", in: issues).message == "unknown provider 'skan'")
    }

    /// A secret put in the wrong key by mistake must not end up in check-config's output
    /// or a startup log: a refused value from the environment is shown as its expression.
    @Test func aRefusedValueFromTheEnvironmentIsNotEchoed() throws {
        let issues = problems(
            "server: { port: \"${SECRET_PORT}\", access_log: \"${SECRET_FLAG}\" }",
            environment: ["SECRET_PORT": "sk_live_abcdef", "SECRET_FLAG": "sk_live_ghijkl"])
        #expect(issues.count == 2)
        #expect(issues.allSatisfy { !$0.message.contains("sk_live") }, "\(issues)")
        #expect(try problem(at: "server.port", in: issues).message.contains("${SECRET_PORT}"))
        // Written in the file, the value is shown as written.
        #expect(try problem(at: "server.port", in: problems("server: { port: eighty }")).message.contains("'eighty'"))
    }

    @Test func aDisabledProviderIsCheckedButNotEnabled() throws {
        #expect(try parse("providers:\n  iad: { enabled: false }").providers.isEmpty)
        // Disabled for want of its credentials, as DESIGN's sketch has it: not an error.
        let waiting = try parse(
            """
            providers:
              s2s: { enabled: false, vendors: { singular: { api_key: "${SINGULAR_KEY}" } } }
            enrichers:
              keyword_lookup: { enabled: false, client_id: "${ASA_CLIENT_ID}", private_key_file: nowhere.pem }
            """)
        #expect(waiting.providers.isEmpty && waiting.enrichers.isEmpty)
        #expect(
            try problem(at: "providers.adservicez", in: problems("providers:\n  adservicez: { enabled: false }"))
                .message.hasPrefix("unknown provider"))
        #expect(try parse("providers:\n  iad: { enabled: true }").providers.map(\.typeName) == ["iad"])
        let issue = try problem(at: "providers.iad.enabeld", in: problems("providers:\n  iad: { enabeld: false }"))
        #expect(issue.message.hasSuffix("did you mean 'enabled'?"))
    }

    @Test func aProviderListedWithoutOptionsIsStillChecked() throws {
        // `iad:` with nothing after it is `iad: {}`: enabled by default, as the README's table says…
        let config = try parse("providers:\n  iad:\n")
        #expect(config.providers.map(\.typeName) == ["iad"])
        // …and an unknown name written the same way is still an unknown provider.
        let issues = problems("providers:\n  adservicez:\n")
        #expect(issues.contains { $0.path == "providers.adservicez" && $0.message.contains("unknown provider") })
    }

    @Test func adServicesSettingsAreChecked() throws {
        let issues = problems(
            """
            providers:
              adservices:
                endpoint: ftp://apple.example
                timeout_ms: 900
                error_backoff_initial_ms: 5000
                error_backoff_max_ms: 1000
                not_found_retrys: 3
            """)
        #expect(try problem(at: "providers.adservices.endpoint", in: issues).line == 3)
        // Apple holds a connection up to a second before a 404: a shorter timeout would
        // turn every early token into a timeout.
        #expect(try problem(at: "providers.adservices.timeout_ms", in: issues).message.contains("between 1500"))
        _ = try problem(at: "providers.adservices.error_backoff_max_ms", in: issues)
        #expect(
            try problem(at: "providers.adservices.not_found_retrys", in: issues).message
                .hasSuffix("did you mean 'not_found_retries'?"))
    }

    @Test func mixpanelFileModeNeedsAFolderAndOnlyItTakesOne() throws {
        let missing = problems(
            "sinks:\n  mp: { type: mixpanel, token: t, mode: file, properties: { campaign_name: c } }")
        #expect(try problem(at: "sinks.mp.directory", in: missing).message == "is required")
        // The keys after it are read, not called unknown.
        #expect(missing.count == 1, "\(missing)")
        let stray = problems("sinks:\n  mp: { type: mixpanel, token: t, directory: ./out }")
        #expect(try problem(at: "sinks.mp.directory", in: stray).message == "only with mode: file")
        let config = try parse(
            "sinks:\n  mp: { type: mixpanel, token: t, mode: file, directory: ./out, event_name: Install }")
        #expect(config.sinks.first?.prepared.summary.contains("NDJSON files in ./out") == true)
    }

    /// `endpoint` wins over `region`: one naming another region's Mixpanel host sent EU
    /// data to the US host, which does not ingest it, and check-config said valid.
    @Test func aMixpanelEndpointOfAnotherRegionsHostIsRefused() throws {
        let clash = problems(
            "sinks:\n  mp: { type: mixpanel, token: t, region: eu, endpoint: \"https://api.mixpanel.com/\" }")
        #expect(
            try problem(at: "sinks.mp.endpoint", in: clash).message.contains("Mixpanel's us host, but region is eu"))
        // A proxy, or the region's own host, is the operator's choice.
        for endpoint in ["https://mixpanel-proxy.example.com", "https://api-eu.mixpanel.com"] {
            #expect(throws: Never.self) {
                try parse("sinks:\n  mp: { type: mixpanel, token: t, region: eu, endpoint: \"\(endpoint)\" }")
            }
        }
    }

    /// Apple Ads' base URLs are checked as every outside base URL is, so that a typo fails
    /// check-config rather than every lookup.
    @Test func keywordLookupsEndpointsMustBeURLs() throws {
        let key =
            "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgevZzL1gdAFr88hb2\nOF/2NxApJCzGCEDdfSp6VQO30hyhRANCAAQRWz+jn65BtOMvdyHKcvjBeBSDZH2r\n1RTwjmYSi9R/zpBnuQ4EiMnCqfMPWiZqB4QdbAd0E7oH50VpuZ1P087G\n-----END PRIVATE KEY-----"
        let issues = problems(
            """
            enrichers:
              keyword_lookup:
                client_id: c
                team_id: t
                key_id: k
                private_key: "${KEY}"
                endpoint: api.ads.apple.com/v1
                token_endpoint: "appleid apple com"
            """, environment: ["KEY": key])
        #expect(
            issues.contains { $0.path == "enrichers.keyword_lookup.endpoint" && $0.message.contains("http(s) URL") },
            "\(issues)")
        #expect(issues.contains { $0.path == "enrichers.keyword_lookup.token_endpoint" }, "\(issues)")
    }

    @Test func mixpanelStartsFromItsOwnBackoffAndChecksPropertyNames() throws {
        let config = try parse(
            """
            sinks:
              mp: { type: mixpanel, token: t, properties: { keyword: "Search Term" } }
              quick: { type: mixpanel, token: t, backoff_initial_ms: 500 }
              local: { type: sqlite }
            """)
        let delivery = Dictionary(uniqueKeysWithValues: config.sinks.map { ($0.name, $0.delivery) })
        // Mixpanel asks for 2 s doubling to 60 s; other sinks keep the generic defaults.
        #expect(delivery["mp"]?.backoffInitial == .seconds(2) && delivery["mp"]?.backoffMax == .seconds(60))
        #expect(
            delivery["quick"]?.backoffInitial == .milliseconds(500) && delivery["quick"]?.backoffMax == .seconds(60))
        #expect(delivery["local"] == DeliverySettings())

        let issues = problems("sinks:\n  mp: { type: mixpanel, token: t, properties: { keywrd: X, keyword: $bad } }")
        #expect(try problem(at: "sinks.mp.properties.keywrd", in: issues).message.contains("unknown property"))
        #expect(try problem(at: "sinks.mp.properties.keyword", in: issues).message.contains("not starting with $"))

        // Names that would hide another property, or Mixpanel's own ones.
        let clashes = problems(
            """
            sinks:
              mp:
                type: mixpanel
                token: t
                property_prefix: "$"
                event_name: $identify
                properties: { keyword: Term, campaign_name: Term, ad_group_name: time, country: asa_org_id }
            """)
        #expect(
            try problem(at: "sinks.mp.properties.campaign_name", in: clashes).message.contains(
                "also the name of keyword"))
        #expect(try problem(at: "sinks.mp.properties.ad_group_name", in: clashes).message.contains("sets itself"))
        #expect(try problem(at: "sinks.mp.property_prefix", in: clashes).message.contains("must not start with $"))
        #expect(try problem(at: "sinks.mp.event_name", in: clashes).message.contains("$identify"))
        let prefixed = problems("sinks:\n  mp: { type: mixpanel, token: t, properties: { country: asa_org_id } }")
        #expect(try problem(at: "sinks.mp.properties.country", in: prefixed).message.contains("org_id, prefixed"))
    }

    @Test func postbackKeysAndPolicyAreChecked() throws {
        let issues = problems(
            """
            providers:
              skadnetwork:
                on_invalid_signature: drop
                keys: { skan_p256: "bm90IGEga2V5", skan_p192: "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE8YzdO7eM97s/IJ25kdW5CZ3A14USE5IJ5Ha/vhWaxI6UBI1ZxCEvjrKxVluVGe6qWwF1BDFq+QHqKfH5u+wxHQ==" }
            """)
        #expect(
            try problem(at: "providers.skadnetwork.on_invalid_signature", in: issues).message.contains(
                "reject, quarantine"))
        #expect(try problem(at: "providers.skadnetwork.keys.skan_p256", in: issues).message.contains("P-256"))
        // A P-256 key where the P-192 one belongs is refused, not trusted.
        #expect(try problem(at: "providers.skadnetwork.keys.skan_p192", in: issues).message.contains("P-192"))
        let routes = try parse(
            "sinks:\n  audit: { type: sqlite }\nroutes:\n  - { sinks: [audit], where: { quarantined: true } }")
        #expect(routes.routes.first?.filter.quarantined == true)
    }

    // MARK: the sqlite sink's file

    @Test func aSQLiteSinkWithoutAPathUsesTheStoragePath() throws {
        let config = try parse(
            """
            storage:
              sqlite: { path: /srv/gateway/store.sqlite }
            sinks:
              local: { type: sqlite }
              elsewhere: { type: sqlite, path: /srv/reports.sqlite }
            """)
        #expect(
            config.sinks.map(\.prepared.summary) == [
                "table attribution_records in /srv/gateway/store.sqlite",
                "table attribution_records in /srv/reports.sqlite",
            ])
    }

    @Test func aSQLiteSinksIndexesAreRecordFieldsAndRecordIDNeedsNone() throws {
        let config = try parse(
            """
            storage:
              sqlite: { path: /srv/gw.sqlite }
            sinks:
              lean: { type: sqlite, indexes: [record_id, keyword_id, campaign_id, keyword_id] }
              bare: { type: sqlite, path: /srv/bare.sqlite, indexes: [] }
            """)
        #expect(
            config.sinks.map(\.prepared.summary) == [
                "table attribution_records in /srv/gw.sqlite, indexes on keyword_id, campaign_id",
                "table attribution_records in /srv/bare.sqlite, no indexes",
            ])
        let issues = problems("sinks:\n  local: { type: sqlite, indexes: [keyword_id, campaing_id] }")
        let issue = try problem(at: "sinks.local.indexes", in: issues)
        #expect(issue.message == "'campaing_id' is not one of the allowed names, did you mean 'campaign_id'?")
    }

    @Test func aSQLiteSinkMayLeaveTheRawPayloadToTheStore() throws {
        let config = try parse(
            """
            storage:
              sqlite: { path: /srv/gw.sqlite }
            sinks:
              compact: { type: sqlite, raw: false }
              full: { type: sqlite, path: /srv/full.sqlite, raw: true, indexes: [] }
            """)
        #expect(
            config.sinks.map(\.prepared.summary) == [
                "table attribution_records in /srv/gw.sqlite, without raw payloads",
                "table attribution_records in /srv/full.sqlite, no indexes",
            ])
        let issue = try problem(
            at: "sinks.local.raw", in: problems("sinks:\n  local: { type: sqlite, raw: sometimes }"))
        #expect(issue.message.contains("expected true or false"))
    }

    @Test func aSQLiteSinkMayBeAViewOverTheStoresOwnRecords() throws {
        let config = try parse(
            """
            storage:
              sqlite: { path: /srv/gw.sqlite }
            sinks:
              local: { type: sqlite, view: true, indexes: [app_user_id] }
            """)
        #expect(
            config.sinks.map(\.prepared.summary) == [
                "view attribution_records in /srv/gw.sqlite, indexes on app_user_id"
            ])
        let elsewhere = problems(
            "storage:\n  sqlite: { path: /srv/gw.sqlite }\nsinks:\n  local: { type: sqlite, view: true, path: /srv/other.sqlite }"
        )
        #expect(try problem(at: "sinks.local.view", in: elsewhere).message.contains("store's own file"))
        let raw = problems("sinks:\n  local: { type: sqlite, view: true, raw: true }")
        #expect(try problem(at: "sinks.local.raw", in: raw).message.contains("no raw payloads"))
        let postgres = problems(
            "storage:\n  postgres: { url: \"postgres://gw@db/gw\" }\nsinks:\n  local: { type: sqlite, view: true }")
        #expect(try problem(at: "sinks.local.view", in: postgres).message.contains("store to be SQLite"))
        // The store's file named another way is still its own.
        let same = try parse(
            "storage:\n  sqlite: { path: /srv/gw.sqlite }\nsinks:\n  local: { type: sqlite, view: true, path: /srv/./gw.sqlite }"
        )
        #expect(same.sinks.count == 1)
    }

    /// A table and a view of one name cannot share a file or a database, so a config asking
    /// for both is refused before either sink starts, on either backend.
    @Test func twoSinksCannotMakeOneNameATableAndAView() throws {
        let sqlite = problems(
            """
            storage:
              sqlite: { path: /srv/gw.sqlite }
            sinks:
              listed: { type: sqlite, view: true }
              copied: { type: sqlite, path: /srv/../srv/gw.sqlite }
            """)
        let issue = try problem(at: "sinks.copied", in: sqlite)
        #expect(
            issue.message.contains("attribution_records in /srv/gw.sqlite a table, where sink 'listed' makes it a view")
        )
        let postgres = problems(
            """
            storage:
              postgres: { url: "postgres://gw@db/gw" }
            sinks:
              listed: { type: postgres, view: true }
              copied: { type: postgres, url: "postgres://analyst@db:5432/gw" }
            """)
        #expect(try problem(at: "sinks.copied", in: postgres).message.contains("where sink 'listed' makes it a view"))
        // Two tables, or a table in another file, are fine.
        let apart = try parse(
            """
            storage:
              sqlite: { path: /srv/gw.sqlite }
            sinks:
              listed: { type: sqlite, view: true }
              copied: { type: sqlite, path: /srv/copy.sqlite }
              again: { type: sqlite, path: /srv/copy.sqlite, raw: false }
            """)
        #expect(apart.sinks.count == 3)
    }

    // MARK: ${VAR} interpolation

    @Test func environmentVariablesAreInterpolated() throws {
        let yaml = """
            server:
              host: ${HOST}
              port: ${PORT:-9000}
              log_level: ${LEVEL:-warning}
            storage:
              sqlite:
                path: /var/${DIR:-gateway}/store-${ENV_NAME}.sqlite
            """
        let config = try parse(yaml, environment: ["HOST": "0.0.0.0", "ENV_NAME": "prod", "LEVEL": "debug"])
        #expect(config.server.host == "0.0.0.0")
        #expect(config.server.port == 9000)
        #expect(config.server.logLevel == "debug")
        #expect(config.storage.sqlitePath == "/var/gateway/store-prod.sqlite")

        // A set variable wins over the default; an empty one falls back to it, as in a shell.
        let set = try parse(yaml, environment: ["HOST": "h", "ENV_NAME": "e", "PORT": "7000", "DIR": "srv"])
        #expect(set.server.port == 7000)
        #expect(set.storage.sqlitePath == "/var/srv/store-e.sqlite")
        #expect(try parse(yaml, environment: ["HOST": "h", "ENV_NAME": "e", "PORT": ""]).server.port == 9000)
    }

    @Test func aMissingVariableWithoutDefaultIsAnError() throws {
        let issues = problems(
            """
            server:
              host: ${GATEWAY_TEST_UNSET_HOST}
              port: ${GATEWAY_TEST_UNSET_PORT:-8081}
            """)
        #expect(issues.count == 1, "\(issues)")
        let issue = try problem(at: "server.host", in: issues)
        #expect(issue.message.contains("GATEWAY_TEST_UNSET_HOST"))
        #expect(issue.line == 2)
    }

    @Test func anInterpolatedValueIsStillTypeChecked() throws {
        let issue = try problem(
            at: "server.port", in: problems("server:\n  port: ${PORT}", environment: ["PORT": "eighty"]))
        #expect(issue.message == "expected an integer, found the value of ${PORT}")
    }

    /// `${A:-${B}}` read up to its first `}` made the literal text `${B}` the value: a key
    /// anyone reading the config could use, a webhook signed with a known secret.
    @Test func aDefaultMayItselfReadTheEnvironment() throws {
        let yaml = """
            server: { host: "${HOST:-${FALLBACK_HOST:-127.0.0.2}}" }
            storage: { sqlite: { path: "/srv/${DIR:-${ALT_DIR}}/gw.sqlite}" } }
            """
        let fallback = try parse(yaml, environment: ["FALLBACK_HOST": "10.0.0.1", "ALT_DIR": "alt"])
        #expect(fallback.server.host == "10.0.0.1")
        // A `}` past the expression is the value's own.
        #expect(fallback.storage.sqlitePath == "/srv/alt/gw.sqlite}")
        let deepest = try parse(yaml, environment: ["ALT_DIR": "alt"])
        #expect(deepest.server.host == "127.0.0.2")
        let first = try parse(yaml, environment: ["HOST": "h", "FALLBACK_HOST": "f", "DIR": "d"])
        #expect(first.server.host == "h")
        #expect(first.storage.sqlitePath == "/srv/d/gw.sqlite}")
        // A default that is not used is not read: its missing variable is no error.
        let issue = try problem(at: "storage.sqlite.path", in: problems(yaml))
        #expect(issue.message.contains("ALT_DIR"), "\(issue)")
    }

    /// An exec sink's `./plugins/forward.py` is a file beside config.yaml, as every file
    /// the config names; other words of the command are left as written.
    @Test func anExecCommandsRelativeFilesAreBesideTheConfig() throws {
        let diagnostics = ConfigDiagnostics(file: "/etc/gateway/config.yaml")
        let words = ["python3", "./plugins/forward.py", "--mode", "fast", "../shared/extra.py", "/opt/x.py"]
        let node = ConfigNode(
            .mapping([
                (key: "command", value: ConfigNode(.sequence(words.map { ConfigNode(.scalar($0, plain: true)) })))
            ]))
        let reader = ConfigReader(node: node, path: "sinks.plugin", diagnostics: diagnostics, environment: [:])
        let options = try #require(
            ExecSinkPlugin.readOptions(
                reader, context: SinkContext(name: "plugin", storagePath: "/tmp/s.sqlite", logger: .init(label: "t"))))
        #expect(
            options.command == [
                "python3", "/etc/gateway/plugins/forward.py", "--mode", "fast", "/etc/shared/extra.py", "/opt/x.py",
            ])
    }

    /// A program the machine cannot run, or a file beside config.yaml that is not there,
    /// is a config error: found only at the first record, the gateway started ready and
    /// every record failed with "Broken pipe" for days.
    @Test func anExecCommandThatCannotRunIsAnError() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("exec-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: folder.appendingPathComponent("plugins"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        _ = FileManager.default.createFile(
            atPath: folder.appendingPathComponent("plugins/forward.py").path, contents: Data())
        func issues(_ words: [String], file: String? = nil) -> [String] {
            let diagnostics = ConfigDiagnostics(file: file ?? folder.appendingPathComponent("config.yaml").path)
            let node = ConfigNode(
                .mapping([
                    (key: "command", value: ConfigNode(.sequence(words.map { ConfigNode(.scalar($0, plain: true)) })))
                ]))
            let reader = ConfigReader(node: node, path: "sinks.plugin", diagnostics: diagnostics, environment: [:])
            _ = ExecSinkPlugin.readOptions(
                reader, context: SinkContext(name: "plugin", storagePath: "/tmp/s.sqlite", logger: .init(label: "t")))
            return diagnostics.issues.map { "\($0.path): \($0.message)" }
        }
        #expect(issues(["python3", "./plugins/forward.py"]).isEmpty)
        #expect(issues(["/bin/sh", "-c", "cat"]).isEmpty)
        let missing = issues(["no-such-program-7f3a", "./plugins/forward.py"])
        #expect(missing.count == 1 && missing[0].contains("sinks.plugin.command: names no program"), "\(missing)")
        #expect(missing[0].contains("no-such-program-7f3a"))
        let notExecutable = issues([folder.appendingPathComponent("plugins/forward.py").path])
        #expect(notExecutable.count == 1, "\(notExecutable)")
        let noFile = issues(["python3", "./plugins/gone.py"])
        #expect(noFile.count == 1 && noFile[0].contains("./plugins/gone.py"), "\(noFile)")
        // With the config named without a folder (`scripts/serve`'s `config.yaml`), a
        // missing file is still found missing; and a folder does not pass as a program.
        let bare = issues(["python3", "./plugins/gone-\(UUID().uuidString).py"], file: "config.yaml")
        #expect(bare.count == 1 && bare[0].contains("gone-"), "\(bare)")
        let folderAsProgram = issues([folder.appendingPathComponent("plugins").path])
        #expect(folderAsProgram.count == 1 && folderAsProgram[0].contains("names no program"), "\(folderAsProgram)")
    }

    /// A command line written as one string is refused, not run as a program named by the
    /// whole line, and not shown: its arguments may hold a secret.
    @Test func anExecCommandAsOneStringIsRefusedUnshown() throws {
        let yaml = """
            sinks: { ex: { type: exec, command: "/bin/cat --token=literal-secret-0123" } }
            routes: [ { sinks: [ex] } ]
            """
        #expect {
            try parse(yaml)
        } throws: { error in
            let text = "\(error)"
            return text.contains("sinks.ex.command") && text.contains("expected a list")
                && !text.contains("literal-secret-0123")
        }
        // One word is the program, as before.
        let one = try parse(yaml.replacingOccurrences(of: "\"/bin/cat --token=literal-secret-0123\"", with: "/bin/cat"))
        #expect(one.sinks.map(\.name) == ["ex"])
    }

    /// Kubernetes may name a variable with `.` or `-`; `${…}` reads it as before.
    @Test func aVariableNameMayHoldDotsAndDashes() throws {
        let config = try parse("server: { host: \"${pod.host-ip}\" }", environment: ["pod.host-ip": "10.1.2.3"])
        #expect(config.server.host == "10.1.2.3")
    }

    /// An empty variable counts as unset, and the message says which it is.
    @Test func aVariableSetButEmptyIsSaidSo() throws {
        let empty = problems("server: { host: \"${HOST}\" }", environment: ["HOST": ""])
        #expect(
            empty.map(\.message) == [
                "environment variable HOST is set but empty (write ${HOST:-default} to give a default)"
            ])
        let unset = problems("server: { host: \"${HOST}\" }", environment: [:])
        #expect(unset.first?.message.contains("HOST is not set") == true)
    }

    @Test func anExpressionThatNamesNoVariableIsAnError() throws {
        for written in ["${APP KEY}", "${1KEY}", "${}", "${KEY:-${}"] {
            let issues = problems("server: { host: \"\(written)\" }", environment: ["APP": "a", "KEY": "k"])
            #expect(issues.count == 1, "\(written): \(issues)")
        }
    }

    /// Any issue, whatever key it is about, quotes no value read from the environment, even
    /// one in a list (`vendor: ${SINGULAR_KEY}`) or repeated in a message of its own.
    @Test func noIssueQuotesAValueFromTheEnvironment() throws {
        let secret = "sk_live_TOPSECRET_1111"
        let issues = problems(
            """
            providers: { s2s: { vendor: "${SINGULAR_KEY}" } }
            sinks: { local: { type: "${SINGULAR_KEY}" } }
            routes: [{ sinks: [local], where: { kind: ["${SINGULAR_KEY}"], provider: ["${SINGULAR_KEY}"] } }]
            """, environment: ["SINGULAR_KEY": secret])
        #expect(issues.count >= 3, "\(issues)")
        #expect(issues.allSatisfy { !$0.description.contains("TOPSECRET") }, "\(issues)")
        #expect(issues.contains { $0.message.contains("${SINGULAR_KEY}") }, "\(issues)")
    }

    /// Nine levels of ten aliases each is a small file and a billion values: refused at
    /// once, before it takes the memory of the server reloading it.
    @Test func aliasesThatMultiplyAFileAreRefused() throws {
        var yaml = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
        for level in 1...5 {
            yaml +=
                "a\(level): &a\(level) [" + Array(repeating: "*a\(level - 1)", count: 10).joined(separator: ", ")
                + "]\n"
        }
        let issues = problems(yaml)
        #expect(issues.count == 1, "\(issues.prefix(3))")
        #expect(issues.first?.message.contains("aliases expand") == true, "\(issues.prefix(3))")
        // An alias or two, as a file may share a list, still reads.
        let shared = try parse("server: { host: &h 127.0.0.3 }\nstorage: { sqlite: { path: *h } }")
        #expect(shared.storage.sqlitePath.hasSuffix("127.0.0.3"))
    }

    /// A file the YAML reader refuses (a control character) is named by position: Yams's
    /// own message quotes the line, which may be an API key's.
    @Test func anUnreadableFileIsNamedWithoutItsLine() throws {
        let issues = problems("auth:\n  api_keys:\n    - { app_id: \"1\", key: \"abcdefgh\u{01}ijklmnopqrstuv\" }\n")
        #expect(issues.count == 1, "\(issues)")
        #expect(
            issues.allSatisfy { !$0.description.contains("abcdefgh") && !$0.description.contains("ijklmnop") },
            "\(issues)")
        #expect(issues.first?.line == 3, "\(issues)")
    }

    @Test func anUnterminatedReferenceIsAnError() throws {
        let issue = try problem(at: "server.host", in: problems("server:\n  host: ${HOST", environment: ["HOST": "h"]))
        #expect(issue.message.contains("unterminated"))
    }
}
