import Crypto
import Foundation
import GatewayCore
import GatewaySpawn
import GatewayTestSupport
import GRDB
import PostgresNIO
import Synchronization
import Testing

/// The `attribution-gateway` commands, run as a user runs them.
@Suite struct CommandLineTests {
    struct Run: Sendable {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    /// Runs the command and waits for it on a thread of its own (see `onThread`).
    func run(_ arguments: [String], stdin: String? = nil) async throws -> Run {
        try await onThread { try Self.runBlocking(arguments, stdin: stdin) }
    }

    private static func runBlocking(_ arguments: [String], stdin: String?) throws -> Run {
        let out = Pipe(), err = Pipe(), input = Pipe()
        let process = try ChildProcess(
            executable: GatewayProcess.executableURL.path, arguments: arguments,
            stdin: .descriptor(input.fileHandleForReading.fileDescriptor),
            stdout: .descriptor(out.fileHandleForWriting.fileDescriptor),
            stderr: .descriptor(err.fileHandleForWriting.fileDescriptor))
        // The child's ends are its own: ours left open, reading to the end would never end.
        for end in [input.fileHandleForReading, out.fileHandleForWriting, err.fileHandleForWriting] {
            try end.close()
        }
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try input.fileHandleForWriting.close()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(
            status: process.terminationStatus ?? -1, stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: stderr, as: UTF8.self))
    }

    @Test func checkConfigReportsEveryIssueWithItsLineAndFails() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let path = env.directory.appendingPathComponent("bad.yaml").path
        try """
        server:
          host: 127.0.0.1
          port: abc
        storage: { sqlite: { path: \(env.databasePath) } }
        sinks:
          local: { type: sqlite, batch_sise: 10 }
        routes:
          - sinks: [local, missing]
        """.write(toFile: path, atomically: true, encoding: .utf8)

        let result = try await run(["check-config", path])
        #expect(result.status == 1)
        #expect(result.stderr.contains("bad.yaml:3:9: server.port: expected an integer, found 'abc'"))
        #expect(
            result.stderr.contains(
                "bad.yaml:6:26: sinks.local.batch_sise: unknown key 'batch_sise', did you mean 'batch_size'?"))
        #expect(result.stderr.contains("bad.yaml:8:12: routes[0].sinks: route names sink 'missing'"))
        // Named with --config, as every other command takes it.
        let named = try await run(["check-config", "--config", path])
        #expect(named.status == 1 && named.stderr.contains("server.port: expected an integer"))
    }

    /// The summary's batch size is the one delivery makes: `batch_size`, capped by the
    /// sink's own limit (an exec's `max_batch_size`, a SQLite table's 500 rows).
    @Test func checkConfigShowsTheBatchesDeliveryMakes() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let path = env.directory.appendingPathComponent("batches.yaml").path
        try """
        storage: { sqlite: { path: \(env.databasePath) } }
        sinks:
          run: { type: exec, command: [/bin/cat], max_batch_size: 5 }
          table: { type: sqlite, batch_size: 2000 }
          few: { type: sqlite, batch_size: 20 }
          sheet: { type: csv, path: \(env.directory.path)/out.csv, batch_size: 5000 }
        routes:
          - sinks: [run, table, few, sheet]
        """.write(toFile: path, atomically: true, encoding: .utf8)
        let result = try await run(["check-config", path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("run (exec): runs /bin/cat, NDJSON over stdin/stdout; batches of up to 5,"))
        #expect(result.stdout.contains("; batches of up to 500,"), "\(result.stdout)")
        #expect(result.stdout.contains("; batches of up to 20,"), "\(result.stdout)")
        #expect(result.stdout.contains("; batches of up to 1000,"), "\(result.stdout)")
    }

    /// As ssh does for its keys: a private key file that others can read is said, by
    /// `check-config` and by `serve`, which still start.
    @Test func aPrivateKeyFileOthersCanReadIsWarnedAbout() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let keyFile = env.directory.appendingPathComponent("ads.pem")
        try P256.Signing.PrivateKey().pemRepresentation.write(to: keyFile, atomically: true, encoding: .utf8)
        let config = env.directory.appendingPathComponent("config.yaml").path
        try
            (env.yaml(logLevel: "info") + """

                enrichers:
                  keyword_lookup:
                    client_id: SEARCHADS.c
                    team_id: SEARCHADS.t
                    key_id: k
                    private_key_file: ads.pem
                    token_endpoint: http://127.0.0.1:9/token
                    endpoint: http://127.0.0.1:9
                """).write(toFile: config, atomically: true, encoding: .utf8)
        let warning =
            "enrichers.keyword_lookup.private_key_file: the secret in \(keyFile.path) can be read by other users"

        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: keyFile.path)
        let loose = try await run(["check-config", config])
        #expect(loose.status == 0, "\(loose.stderr)")
        #expect(loose.stderr.contains("warning: \(config):"), "\(loose.stderr)")
        #expect(loose.stderr.contains(warning + " (mode 0644); chmod 600 it"), "\(loose.stderr)")
        let server = try GatewayProcess(config: config, logURL: env.directory.appendingPathComponent("serve.log"))
        try await server.start()
        server.kill(SIGKILL)
        let log = try String(contentsOf: env.directory.appendingPathComponent("serve.log"), encoding: .utf8)
        #expect(log.contains(#""level":"warning""#) && log.contains(warning), "\(log)")

        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile.path)
        let tight = try await run(["check-config", config])
        #expect(tight.status == 0 && !tight.stderr.contains("warning"), "\(tight.stderr)")
    }

    @Test func checkConfigAcceptsTheRepositoryConfig() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let result = try await run(["check-config", root.appendingPathComponent("config.yaml").path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("providers: adservices, iad, skadnetwork"))
        // Commented out in the repository's file; said, so that a typo in its name shows.
        #expect(result.stdout.contains("enrichers: none enabled"))
        #expect(result.stdout.contains("1. all records but test payloads and quarantined postbacks -> local"))
        #expect(result.stdout.contains("(durability full); raw payloads kept 30 days"), "\(result.stdout)")
    }

    /// A folder where a file belongs is said in words, not as a Foundation error.
    @Test func aFolderWhereAFileBelongsIsSaidSo() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = try env.writeConfig()
        let checked = try await run(["check-config", env.directory.path])
        #expect(checked.status == 1 && checked.stderr.contains("a folder, not a configuration file"), "\(checked)")
        let imported = try await run(["import", "--provider", "iad", "--config", config, env.directory.path])
        #expect(imported.status == 2 && imported.stderr.contains("cannot read"), "\(imported.stderr)")
        #expect(!(checked.stderr + imported.stderr).contains("NSCocoaErrorDomain"))
    }

    /// The summary names the store the file chooses; it said SQLite for a PostgreSQL store.
    @Test func checkConfigNamesAPostgresStoreWithoutItsPassword() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = env.directory.appendingPathComponent("pg.yaml").path
        try """
        storage: { postgres: { url: "postgres://gw:hunter2@db.internal:5432/attribution", pool_size: 4 } }
        providers: { iad: {} }
        sinks: { out: { type: postgres } }
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let result = try await run(["check-config", config])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("storage: postgres postgres://gw@db.internal:5432/attribution (pool of 4)"))
        #expect(!result.stdout.contains("hunter2") && !result.stdout.contains("sqlite"), "\(result.stdout)")
    }

    /// "-1" was read as an option's name: "Missing value for '--limit'" said nothing of
    /// what was wrong.
    @Test func dlqNamesANegativeLimitOrIDForWhatItIs() async throws {
        let limit = try await run(["dlq", "list", "--limit", "-1"])
        #expect(limit.status != 0 && limit.stderr.contains("--limit -1: at least 1"), "\(limit.stderr)")
        let id = try await run(["dlq", "retry", "--id", "-5"])
        #expect(id.status != 0 && id.stderr.contains("--id -5: ids are positive"), "\(id.stderr)")
    }

    @Test func normalizePrintsTheRecordWithoutAServer() async throws {
        let result = try await run(["normalize", "--provider", "iad"], stdin: IAdPayloads.attributed(user: "offline"))
        #expect(result.status == 0, "\(result.stderr)")
        let record = try #require(
            try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(record["keyword"] as? String == "meditation app")
        #expect(record["campaign_id"] as? Int == 542_370_539)
        #expect(record["dedupe_key"] as? String == "iad:1234567890:offline")

        let bad = try await run(["normalize", "--provider", "iad"], stdin: #"{"app_id": "1"}"#)
        #expect(bad.status == 1)
        #expect(bad.stderr.contains("missing_field: app_user_id"))
    }

    @Test func normalizeReadsAnAnswerFromAppleOffline() async throws {
        let answer =
            #"{"attribution":true,"orgId":40669820,"campaignId":542370539,"keywordId":87675432,"conversionType":"preorder","clickDate":"2024-10-08T17:17Z"}"#
        let result = try await run(["normalize", "--provider", "adservices"], stdin: answer)
        #expect(result.status == 0, "\(result.stderr)")
        let record = try #require(
            try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(record["provider"] as? String == "adservices")
        #expect(record["keyword_id"] as? Int == 87_675_432)
        #expect(record["conversion_type"] as? String == "PreOrder")
        #expect(record["click_date"] as? String == "2024-10-08T17:17:00Z")

        for organicAnswer in [#"{"error" : "1"}"#, "{}", #"{"attribution":false}"#] {
            let organic = try await run(["normalize", "--provider", "adservices"], stdin: organicAnswer)
            #expect(organic.stdout.contains(#""attributed" : false"#), "\(organicAnswer)")
        }
        // Another source's payload is refused, not read as an organic answer.
        let iAd = try await run(["normalize", "--provider", "adservices"], stdin: IAdPayloads.attributed(user: "u1"))
        #expect(iAd.status != 0)
        #expect(iAd.stderr.contains("not an answer from Apple's AdServices API"), "\(iAd.stderr)")
    }

    @Test func verifyPostbackPrintsTheVerdictAndExitsByIt() async throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("GatewayProvidersTests/Fixtures/skan_public_vectors.json")
        let vectors = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [[String: Any]])
        func postback(_ id: String) throws -> String {
            let vector = try #require(vectors.first { $0["id"] as? String == id })
            return String(decoding: try JSONSerialization.data(withJSONObject: vector["postback"]!), as: UTF8.self)
        }
        let genuine = try await run(["verify-postback"], stdin: try postback("skan40-apple-doc-fine"))
        #expect(genuine.status == 0 && genuine.stdout == "verified 4.0\n")
        let p192 = try await run(["verify-postback"], stdin: try postback("skan10-ironsource-real"))
        #expect(p192.status == 0 && p192.stdout == "verified 1.0\n")
        let tampered = try await run(["verify-postback"], stdin: try postback("t-skan40-txid"))
        #expect(tampered.status == 1 && tampered.stdout == "invalid 4.0 bad signature\n")
        let future = try await run(["verify-postback"], stdin: #"{"version": "9.0", "attribution-signature": "MEUC"}"#)
        #expect(future.status == 2 && future.stdout.hasPrefix("unverifiable 9.0 unknown version"))
        // Another key: Apple's genuine postback no longer verifies.
        let otherKey =
            "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE8YzdO7eM97s/IJ25kdW5CZ3A14USE5IJ5Ha/vhWaxI6UBI1ZxCEvjrKxVluVGe6qWwF1BDFq+QHqKfH5u+wxHQ=="
        let withKey = try await run(
            ["verify-postback", "--key", otherKey], stdin: try postback("skan40-apple-doc-fine"))
        #expect(withKey.status == 1)
    }

    @Test func importIngestsAFileThroughThePipelineAndReportsBadLines() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = try env.writeConfig()
        let lines = [
            IAdPayloads.attributed(user: "history-1").replacingOccurrences(of: "\n", with: ""),
            IAdPayloads.attributed(user: "history-2").replacingOccurrences(of: "\n", with: ""),
            #"{"app_id": "1", "app_user_id": "u"}"#,
            IAdPayloads.attributed(user: "history-1").replacingOccurrences(of: "\n", with: ""),
            "",
        ]
        let file = env.directory.appendingPathComponent("history.jsonl").path
        try lines.joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)

        let result = try await run(["import", "--provider", "iad", "--config", config, file])
        #expect(result.status == 1)
        #expect(result.stdout.contains("2 stored, 1 duplicates, 1 lines rejected"))
        #expect(result.stdout.contains("line 3: missing_field: Version3.1"))
        #expect(result.stderr.contains("importing"))

        // Stored and waiting in the outbox for the running gateway.
        let again = try await run(["import", "--provider", "iad", "--config", config, file])
        #expect(again.stdout.contains("0 stored, 3 duplicates, 1 lines rejected"))
    }

    /// A file is read a chunk at a time (it was read whole: an import held its file in memory):
    /// lines across chunk boundaries are read whole, a line too long to hold is skipped by its
    /// number, and a last line without its line break is read.
    @Test func importReadsAFileLargerThanItsChunksLineByLine() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = try env.writeConfig()
        let line = { (user: Int) in
            IAdPayloads.attributed(user: "chunked-\(user)").replacingOccurrences(of: "\n", with: "")
        }
        // More than a chunk (1 MB) before the long line, and some after it.
        let before = (0..<3000).map(line)
        let long = #"{"app_id": "1", "pad": ""# + String(repeating: "x", count: 17 << 20) + #""}"#
        let after = (3000..<3500).map(line)
        let file = env.directory.appendingPathComponent("large.jsonl").path
        try (before + [long] + after).joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)

        let result = try await run(["import", "--provider", "iad", "--config", config, file])
        #expect(result.status == 1)
        #expect(result.stdout.contains("3500 stored, 0 duplicates, 1 lines rejected"), "\(result.stdout)")
        #expect(result.stdout.contains("line 3001: longer than 16 MB; skipped"), "\(result.stdout)")
        #expect(result.stderr.contains("MB"))
    }

    /// `import` reads lines as `serve` reads posted ones: with the config's provider
    /// options. It used the defaults, so a forged postback that `serve` refused under
    /// `on_invalid_signature: reject` was stored by `import`, and exit 0.
    @Test func importReadsLinesWithTheConfigsProviderOptions() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("GatewayProvidersTests/Fixtures/skan_public_vectors.json")
        let vectors = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [[String: Any]])
        let tampered = try #require(vectors.first { $0["id"] as? String == "t-skan40-txid" }?["postback"])
        let history = env.directory.appendingPathComponent("postbacks.jsonl").path
        try String(decoding: try JSONSerialization.data(withJSONObject: tampered), as: UTF8.self)
            .write(toFile: history, atomically: true, encoding: .utf8)

        let rejecting = try storeConfig(env, providers: "skadnetwork: { on_invalid_signature: reject }")
        let refused = try await run(["import", "--provider", "skadnetwork", "--config", rejecting, history])
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stdout.contains("0 stored, 0 duplicates, 1 lines rejected"), "\(refused.stdout)")
        #expect(refused.stdout.contains("invalid_signature"), "\(refused.stdout)")

        // A provider the config does not enable reads with its defaults (quarantine), and says so.
        let without = try storeConfig(env, providers: "iad: {}")
        let quarantined = try await run(["import", "--provider", "skadnetwork", "--config", without, history])
        #expect(quarantined.status == 0, "\(quarantined)")
        #expect(quarantined.stdout.contains("1 stored"), "\(quarantined.stdout)")
        #expect(quarantined.stderr.contains("skadnetwork is not enabled"), "\(quarantined.stderr)")
    }

    /// A config with `providers` and the SQLite sink, storing in `env`'s SQLite file or in the
    /// PostgreSQL database `postgres`, written beside it.
    func storeConfig(_ env: TestEnvironment, providers: String, postgres: PostgresURL? = nil) throws -> String {
        let config = env.directory.appendingPathComponent("store.yaml").path
        let storage =
            postgres.map { "postgres: { url: \"\($0)\", timeout_ms: \(TestPostgres.timeoutMs) }" }
            ?? "sqlite: { path: \(env.databasePath), durability: normal }"
        try """
        storage: { \(storage) }
        providers: { \(providers) }
        sinks: { local: { type: sqlite } }
        """.write(toFile: config, atomically: true, encoding: .utf8)
        return config
    }

    @Test func reportKeywordsJoinsInstallsToPurchasesPerKeyword() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = try storeConfig(env, providers: "iad: {}, s2s: {}")
        // Two users came through the keyword, one organically; two purchases by the first
        // (one reported twice), one by the organic user.
        let installs =
            ["buyer", "browser"].map { IAdPayloads.attributed(user: $0).replacingOccurrences(of: "\n", with: "") }
            // Installed before its purchase (an organic answer has no date of its own).
            + [
                #"{"received_at":"2023-11-01T00:00:00Z","payload":{"app_id":"1234567890","app_user_id":"organic","#
                    + #""Version3.1":{"iad-attribution":"false"}}}"#
            ]
            // A keyword of its own holding a line break, as iAd's routes take it.
            + [
                IAdPayloads.attributed(user: "spaced").replacingOccurrences(of: "\n", with: "")
                    .replacingOccurrences(of: #""iad-keyword-id":"87675432""#, with: #""iad-keyword-id":"11""#)
                    .replacingOccurrences(
                        of: #""iad-keyword":"meditation app""#, with: #""iad-keyword":"calm\nsleep\u202e""#)
            ]
        func purchase(_ user: String, _ transaction: String, _ amount: String) -> String {
            #"{"type":"purchase","app_id":"1234567890","app_user_id":"\#(user)","revenue":\#(amount),"currency":"USD","transaction_id":"\#(transaction)","timestamp":1700000000}"#
        }
        let purchases = [
            purchase("buyer", "t1", "4.99"), purchase("buyer", "t2", "9.99"), purchase("organic", "t3", "1.00"),
        ]
        let installFile = env.directory.appendingPathComponent("installs.jsonl").path
        let purchaseFile = env.directory.appendingPathComponent("purchases.jsonl").path
        try installs.joined(separator: "\n").write(toFile: installFile, atomically: true, encoding: .utf8)
        try (purchases + [purchases[0]]).joined(separator: "\n").write(
            toFile: purchaseFile, atomically: true, encoding: .utf8)
        #expect(try await run(["import", "--provider", "iad", "--config", config, installFile]).status == 0)
        #expect(try await run(["import", "--provider", "s2s", "--config", config, purchaseFile]).status == 0)

        let result = try await run(["report", "keywords", "--config", config, "--format", "json"])
        #expect(result.status == 0, "\(result.stderr)")
        // Progress on stderr, the report alone on stdout.
        #expect(result.stderr.contains("reading [") && result.stderr.contains("100% 7/7"), "\(result.stderr)")
        struct Row: Decodable {
            let network: String?, keyword: String?, campaign: String?
            let installs: Int, paying_users: Int, purchases: Int
            let revenue: [String: Decimal]
        }
        let rows = try JSONDecoder().decode([Row].self, from: Data(result.stdout.utf8))
        let keyword = try #require(rows.first { $0.keyword == "meditation app" })
        #expect(keyword.campaign == "US Search - Meditation" && keyword.network == "Apple Search Ads")
        #expect(keyword.installs == 2 && keyword.paying_users == 1 && keyword.purchases == 2)
        #expect(keyword.revenue == ["USD": Decimal(string: "14.98")!])
        let organic = try #require(rows.first { $0.network == "organic" })
        #expect(organic.installs == 1 && organic.paying_users == 1 && organic.revenue == ["USD": 1])
        #expect(rows.first?.keyword == "meditation app")
        // A bidi override is written as a JSON escape: the same name to a parser, nothing
        // that reverses the terminal's line.
        #expect(rows.contains { $0.keyword == "calm\nsleep\u{202E}" })
        #expect(!result.stdout.unicodeScalars.contains("\u{202E}") && result.stdout.contains(#"\u202e"#))

        let table = try await run(["report", "keywords", "--config", config])
        #expect(table.stdout.contains("meditation app") && table.stdout.contains("USD 14.98"))
        // One of the keyword's two installs paid: 50%, on the keyword's own row.
        let keywordRow = try #require(table.stdout.split(separator: "\n").first { $0.contains("meditation app") })
        #expect(keywordRow.contains("50.0"), "\(keywordRow)")
        // The line break is shown, not printed: every row one line.
        #expect(table.stdout.contains(#"calm\nsleep\u{202e}"#), "\(table.stdout)")
        #expect(table.stdout.split(separator: "\n").count == 1 + rows.count, "\(table.stdout)")
        #expect(table.stdout.split(separator: "\n").first?.hasPrefix("network") == true)
    }

    @Test func aUserWhoseTokenAppleHasNotAnsweredYetIsUnknownNotUnattributed() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = try storeConfig(env, providers: "adservices: {}, s2s: {}")
        func purchase(_ user: String, _ transaction: String) -> String {
            #"{"type":"purchase","app_id":"1234567890","app_user_id":"\#(user)","revenue":4.99,"currency":"USD","transaction_id":"\#(transaction)","timestamp":1700000000}"#
        }
        let purchaseFile = env.directory.appendingPathComponent("purchases.jsonl").path
        try [purchase("waiting", "w1"), purchase("nobody", "n1")].joined(separator: "\n")
            .write(toFile: purchaseFile, atomically: true, encoding: .utf8)
        #expect(try await run(["import", "--provider", "s2s", "--config", config, purchaseFile]).status == 0)
        // The token of user `waiting`, as the AdServices route keeps it while Apple has not
        // answered (Apple down, or its 404 retries): a row of `pending`, no record yet.
        let state =
            #"{"appID":"1234567890","appUserID":"waiting","errors":3,"malformed":0,"notFound":0,"token":"TOKEN"}"#
        try await DatabaseQueue(path: env.databasePath).write { db in
            try db.execute(
                sql: """
                    INSERT INTO pending (record_id, provider, dedupe_key, app_id, received_at, state, attempts, next_attempt_at)
                    VALUES ('01a00000-0000-7000-8000-000000000001', 'adservices', 'adservices:abc', '1234567890', 1699990000, ?, 3, 1699999999)
                    """,
                arguments: [Data(state.utf8)])
        }
        let result = try await run(["report", "keywords", "--config", config, "--format", "json"])
        #expect(result.status == 0, "\(result.stderr)")
        struct Row: Decodable { let network: String?, installs: Int, paying_users: Int, purchases: Int }
        let rows = try JSONDecoder().decode([Row].self, from: Data(result.stdout.utf8))
        let unknown = try #require(rows.first { $0.network == "unknown" }, "\(result.stdout)")
        #expect(unknown.installs == 1 && unknown.paying_users == 1 && unknown.purchases == 1)
        // The user with no install at all is the one unattributed.
        let unattributed = try #require(rows.first { $0.network == "unattributed" }, "\(result.stdout)")
        #expect(unattributed.paying_users == 1 && unattributed.purchases == 1)
        // --app-id holds for waiting tokens too.
        let other = try await run(["report", "keywords", "--config", config, "--format", "json", "--app-id", "42"])
        #expect(try JSONDecoder().decode([Row].self, from: Data(other.stdout.utf8)).isEmpty, "\(other.stdout)")
    }

    /// An event with no timestamp, event_id or transaction is told from a second one alike
    /// only by its arrival: importing the file again stored it again, unannounced.
    @Test func importSaysWhichEventsAnotherImportWouldStoreAgain() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = try storeConfig(env, providers: "s2s: {}")
        let file = env.directory.appendingPathComponent("events.jsonl").path
        try [
            #"{"type":"event","name":"level_up","app_id":"1234567890","app_user_id":"u1"}"#,
            "\t",
            #"{"type":"event","name":"level_up","app_id":"1234567890","app_user_id":"u2","timestamp":1700000000}"#,
            #"{"received_at":"2025-03-01T00:00:00Z","payload":{"type":"event","name":"level_up","app_id":"1234567890","app_user_id":"u3"}}"#,
        ].joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let first = try await run(["import", "--provider", "s2s", "--config", config, file])
        #expect(first.status == 0, "\(first.stdout) \(first.stderr)")
        #expect(first.stdout.contains("3 stored, 0 duplicates, 0 lines rejected"), "\(first.stdout)")
        #expect(first.stderr.contains("1 events have no timestamp, event_id or transaction_id"), "\(first.stderr)")
        let again = try await run(["import", "--provider", "s2s", "--config", config, file])
        #expect(again.stdout.contains("1 stored, 2 duplicates"), "\(again.stdout)")
    }

    @Test func importedHistoryKeepsItsTimeSoAPurchaseGoesToTheInstallBeforeIt() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = try storeConfig(env, providers: "adservices: {}, s2s: {}")
        // Apple's answers have no install time, and the purchase no timestamp: only the time
        // each first arrived says which install came before the purchase. The June
        // redownload through another keyword is first in the file: stamped with the time
        // of the import, both installs would come after the purchase, and the report would
        // credit the one stored first.
        func install(_ time: String, keyword: Int) -> String {
            #"{"received_at":"\#(time)","payload":{"app_id":"1234567890","app_user_id":"h1","attribution":true,"orgId":40669820,"campaignId":542370539,"adGroupId":542317095,"keywordId":\#(keyword),"conversionType":"Download"}}"#
        }
        let purchase =
            #"{"received_at":"2025-03-02T09:00:00Z","payload":{"type":"purchase","app_id":"1234567890","app_user_id":"h1","revenue":4.99,"currency":"USD","transaction_id":"ht1"}}"#
        let installFile = env.directory.appendingPathComponent("installs.jsonl").path
        let purchaseFile = env.directory.appendingPathComponent("purchases.jsonl").path
        try [install("2025-06-01T08:00:00Z", keyword: 222), install("2025-03-01T12:00:00Z", keyword: 111)]
            .joined(separator: "\n").write(toFile: installFile, atomically: true, encoding: .utf8)
        try purchase.write(toFile: purchaseFile, atomically: true, encoding: .utf8)
        let started = Date().timeIntervalSince1970
        let imported = try await run(["import", "--provider", "adservices", "--config", config, installFile])
        #expect(imported.status == 0, "\(imported.stdout) \(imported.stderr)")
        #expect(try await run(["import", "--provider", "s2s", "--config", config, purchaseFile]).status == 0)

        let result = try await run(["report", "keywords", "--config", config, "--format", "json"])
        #expect(result.status == 0, "\(result.stderr)")
        struct Row: Decodable {
            let keyword_id: Int64?
            let installs: Int, paying_users: Int, purchases: Int
        }
        let rows = try JSONDecoder().decode([Row].self, from: Data(result.stdout.utf8))
        // The user's line is their first install's, and the purchase is credited there.
        let march = try #require(rows.first { $0.keyword_id == 111 }, "\(result.stdout)")
        #expect(march.installs == 1 && march.paying_users == 1 && march.purchases == 1, "\(result.stdout)")
        #expect(!rows.contains { $0.keyword_id == 222 }, "\(result.stdout)")

        let store = try DatabaseQueue(path: env.databasePath)
        let (times, queued) = try await store.read { db in
            (
                try Double.fetchAll(db, sql: "SELECT received_at FROM records ORDER BY received_at"),
                try Double.fetchAll(db, sql: "SELECT created_at FROM outbox")
            )
        }
        #expect(times == [1_740_830_400, 1_740_906_000, 1_748_764_800])
        // Queued for the sink now: a year-old outbox row would fail /readyz's age bound.
        #expect(queued.allSatisfy { $0 >= started.rounded(.down) }, "\(queued)")
        // The event's dedupe key holds its time, so importing the file again adds nothing.
        let again = try await run(["import", "--provider", "s2s", "--config", config, purchaseFile])
        #expect(again.stdout.hasPrefix("0 stored, 1 duplicates"), "\(again.stdout)")

        let bad = [
            #"{"received_at":"yesterday","payload":{}}"#, #"{"received_at":"1970-01-01T00:00:00Z","payload":{}}"#,
            #"{"received_at":"2999-01-01T00:00:00Z","payload":{}}"#,
            #"{"received_at":"2025-03-01T12:00:00Z","payload":"x"}"#,
            // Envelopes with a typo, not read as payloads.
            #"{"recieved_at":"2025-03-01T12:00:00Z","payload":{}}"#,
            #"{"received_at":"2025-03-01T12:00:00Z","payload":{},"note":1}"#,
            #"{"Received-At":"2025-03-01T12:00:00Z","payload":{},"source":"x"}"#,
        ]
        let badFile = env.directory.appendingPathComponent("bad.jsonl").path
        try bad.joined(separator: "\n").write(toFile: badFile, atomically: true, encoding: .utf8)
        let refused = try await run(["import", "--provider", "s2s", "--config", config, badFile])
        #expect(refused.status == 1)
        for (line, reason) in [
            (1, "received_at: expected the time"), (2, "received_at: 1970-01-01T00:00:00Z is before the App Store"),
            (3, "received_at: 2999-01-01T00:00:00Z is in the future"), (4, "payload: expected the payload as posted"),
            (6, "note: an import envelope has only received_at and payload; found 'note'"),
        ] {
            #expect(refused.stdout.contains("line \(line): invalid_field: \(reason)"), "\(refused.stdout)")
        }
        #expect(
            refused.stdout.contains(
                "line 5: missing_field: received_at: an import envelope has received_at beside payload; found 'recieved_at'"
            ),
            "\(refused.stdout)")
        #expect(
            refused.stdout.contains(
                "line 7: missing_field: received_at: an import envelope has received_at beside payload; found 'Received-At', 'source'"
            ),
            "\(refused.stdout)")
        // A payload of its own with a key named payload is a payload, not an envelope.
        let plain = try await run(
            ["normalize", "--provider", "s2s"],
            stdin: #"{"type":"event","name":"x","app_id":"1","app_user_id":"u","payload":{}}"#)
        #expect(!plain.stderr.contains("envelope"), "\(plain.stderr)")
    }

    static let backends = ["sqlite"] + (TestPostgres.expected ? ["postgres"] : [])

    /// An import into PostgreSQL lists each record in a `view: true` sink as it stores it:
    /// the view holds the history when the command ends, with nothing left for a server to
    /// deliver.
    @Test(.enabled(if: TestPostgres.expected)) func anImportIntoPostgresFillsTheViewItself() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let database = try await TestPostgres.newDatabase()
        let config = env.directory.appendingPathComponent("view.yaml").path
        try """
        storage: { postgres: { url: "\(database)", timeout_ms: \(TestPostgres.timeoutMs) } }
        providers: { iad: {} }
        sinks: { local: { type: postgres, view: true } }
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let lines = (1...3).map { user in
            #"{"app_id":"1234567890","app_user_id":"u\#(user)","Version3.1":{"iad-attribution":"true","iad-campaign-id":"542370539"}}"#
        }
        let file = env.directory.appendingPathComponent("installs.jsonl").path
        try lines.joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let imported = try await run(["import", "--provider", "iad", "--config", config, file])
        #expect(imported.stdout.contains("3 stored"), "\(imported.stdout) \(imported.stderr)")
        let (listed, waiting) = try await TestPostgres.withClient(database) { client in
            var counts: [Int64] = []
            for sql in ["SELECT count(*) FROM attribution_records", "SELECT count(*) FROM outbox"] {
                for try await count in try await client.query(PostgresQuery(unsafeSQL: sql)).decode(Int64.self) {
                    counts.append(count)
                }
            }
            return (counts[0], counts[1])
        }
        #expect(listed == 3)
        #expect(waiting == 0)
    }

    @Test(arguments: backends)
    func reportKeywordsNamesKeywordsTheCacheLearnedAfterTheirRecords(_ backend: String) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let database = backend == "postgres" ? try await TestPostgres.newDatabase() : nil
        let config = try storeConfig(env, providers: "iad: {}", postgres: database)
        // Stored with ids only, as when Apple Ads was down or no credentials were set.
        let install =
            #"{"app_id":"1234567890","app_user_id":"u1","Version3.1":{"iad-attribution":"true","iad-campaign-id":"542370539","iad-adgroup-id":"542317095","iad-keyword-id":"87675499","iad-conversion-type":"Download"}}"#
        let installs = env.directory.appendingPathComponent("installs.jsonl").path
        try install.write(toFile: installs, atomically: true, encoding: .utf8)
        #expect(try await run(["import", "--provider", "iad", "--config", config, installs]).status == 0)
        #expect(
            try await run(["report", "keywords", "--config", config, "--format", "csv"]).stdout.contains("#87675499"))

        // Then the team loads its keyword export.
        let csv = env.directory.appendingPathComponent("keywords.csv").path
        try """
        Campaign Name,Campaign ID,Ad Group Name,Ad Group ID,Keyword,Match Type,Keyword ID
        US Search - Sleep,542370539,Exact - Core,542317095,sleep sounds,Exact,87675499

        """.write(toFile: csv, atomically: true, encoding: .utf8)
        #expect(try await run(["keywords", "import", "--config", config, csv]).status == 0)
        // A refused name is shown, not run: an escape sequence retitled and cleared the terminal.
        let hostile = env.directory.appendingPathComponent("hostile.csv").path
        try "Keyword ID,Keyword\n42,\u{1B}]0;owned\u{07}\u{1B}[2J\n".write(
            toFile: hostile, atomically: true, encoding: .utf8)
        let refused = try await run(["keywords", "import", "--config", config, hostile])
        #expect(refused.status == 1 && refused.stdout.contains("line 2:"), "\(refused.stdout)")
        #expect(!refused.stdout.contains("\u{1B}") && refused.stdout.contains("\\u{1b}"), "\(refused.stdout)")
        let named = try await run(["report", "keywords", "--config", config, "--format", "csv"])
        #expect(named.stdout.contains("sleep sounds") && named.stdout.contains("US Search - Sleep"), "\(named.stdout)")
        #expect(named.stdout.contains("Exact - Core") && !named.stdout.contains("#87675499"))

        // An app's payload names the same ids as it likes, with a date far ahead so that
        // it would be the line's newest install: the names Apple's cache holds stand.
        let forged =
            #"{"app_id":"1234567890","app_user_id":"u2","Version3.1":{"iad-attribution":"true","iad-campaign-id":"542370539","iad-campaign-name":"HIJACKED","iad-adgroup-id":"542317095","iad-adgroup-name":"HIJACKED","iad-keyword-id":"87675499","iad-keyword":"HIJACKED","iad-conversion-date":"2099-01-01T00:00:00Z","iad-conversion-type":"Download"}}"#
        try forged.write(toFile: installs, atomically: true, encoding: .utf8)
        #expect(try await run(["import", "--provider", "iad", "--config", config, installs]).status == 0)
        let kept = try await run(["report", "keywords", "--config", config, "--format", "csv"])
        #expect(kept.stdout.contains("sleep sounds") && !kept.stdout.contains("HIJACKED"), "\(kept.stdout)")
    }

    @Test func commandsThatReadTheStoreRefuseAPathWithNoStore() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = env.directory.appendingPathComponent("elsewhere.yaml").path
        let missing = env.directory.appendingPathComponent("prod/gateway.sqlite").path
        try "storage: { sqlite: { path: \(missing) } }\nproviders: { iad: {} }\nsinks: { local: { type: sqlite } }\n"
            .write(toFile: config, atomically: true, encoding: .utf8)
        for command in [["report", "keywords"], ["dlq", "list"], ["replay", "--sink", "local"]] {
            let result = try await run(command + ["--config", config])
            #expect(result.status == 1, "\(command)")
            #expect(result.stderr.contains("no store at \(missing)"), "\(command): \(result.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: missing))
    }

    /// The Apple Ads private key is the enricher's, and only the commands that enrich need
    /// it: an operator's shell or cron job running `dlq` or `report` had to hold it too.
    @Test func commandsThatNeverEnrichNeedNoneOfTheEnrichersSecrets() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = env.directory.appendingPathComponent("keys.yaml").path
        try """
        storage: { sqlite: { path: \(env.databasePath) } }
        providers: { iad: {} }
        enrichers:
          keyword_lookup: { client_id: c, team_id: t, key_id: k, private_key: "${ADS_KEY_NEVER_SET_IN_TESTS}" }
        sinks: { local: { type: sqlite } }
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let csv = env.directory.appendingPathComponent("keywords.csv").path
        try
            "Campaign Name,Campaign ID,Ad Group Name,Ad Group ID,Keyword,Match Type,Keyword ID\nUS,1,Core,2,calm,Exact,3\n"
            .write(toFile: csv, atomically: true, encoding: .utf8)
        let commands = [
            ["keywords", "import", csv], ["dlq", "list"], ["report", "keywords"], ["replay", "--sink", "local"],
            ["backup", "--to", env.directory.appendingPathComponent("copy.sqlite").path],
        ]
        for command in commands {
            let result = try await run(command + ["--config", config])
            #expect(result.status == 0, "\(command): \(result.stderr)")
        }
        // Those that enrich, or check, still need it, and say which.
        let checked = try await run(["check-config", config])
        #expect(checked.status == 1 && checked.stderr.contains("ADS_KEY_NEVER_SET_IN_TESTS"), "\(checked)")
    }

    @Test func aSecondServerOnOneStoreRefusesToStartUntilTheFirstIsGone() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = try env.writeConfig()
        let first = try GatewayProcess(config: config, logURL: env.directory.appendingPathComponent("first.log"))
        try await first.start()

        // The same store by its own path, and through a link to the file (SQLite follows it).
        let link = env.directory.appendingPathComponent("alias.sqlite").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: env.databasePath)
        let linked = env.directory.appendingPathComponent("linked.yaml").path
        try env.yaml(logLevel: "info").replacingOccurrences(of: env.databasePath, with: link)
            .write(toFile: linked, atomically: true, encoding: .utf8)
        // A hard link to the file, in another folder, with a lock file of its own.
        let folder = env.directory.appendingPathComponent("snapshot")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let hardLink = folder.appendingPathComponent("gateway.sqlite").path
        try FileManager.default.linkItem(atPath: env.databasePath, toPath: hardLink)
        let snapshot = env.directory.appendingPathComponent("snapshot.yaml").path
        try env.yaml(logLevel: "info").replacingOccurrences(of: env.databasePath, with: hardLink)
            .write(toFile: snapshot, atomically: true, encoding: .utf8)
        /// A second server's log, once it has exited 1 (bounded: one that did start is a
        /// failure, not a hang).
        func refusedLog(_ name: String, _ path: String) async throws -> String {
            let second = try GatewayProcess(config: path, logURL: env.directory.appendingPathComponent("\(name).log"))
            await #expect(throws: GatewayProcess.Failure.self, "\(name)") { try await second.start() }
            #expect(second.process.terminationStatus == 1, "\(name)")
            return try String(contentsOf: second.logURL, encoding: .utf8)
        }
        for (name, path) in [("second", config), ("linked", linked)] {
            let log = try await refusedLog(name, path)
            #expect(log.contains("storage.sqlite.path"), "\(name): \(log)")
            #expect(log.contains("another gateway (pid \(first.process.processIdentifier))"), "\(name): \(log)")
        }
        // Through the hard link, and by the path itself once its lock file is gone, the
        // file's own claim refuses it (neither finds the first server's lock file).
        try FileManager.default.removeItem(atPath: env.databasePath + "-serve.lock")
        for (name, path) in [("hard-linked", snapshot), ("unlocked", config)] {
            let log = try await refusedLog(name, path)
            #expect(log.contains("another gateway is serving this file"), "\(name): \(log)")
        }
        // The first server was not disturbed.
        let (status, _) = try await first.post("/v1/iad", body: IAdPayloads.attributed(user: "lock-user"))
        #expect(status == 202)

        // The kernel drops the claim with the process, even one killed without warning.
        first.kill(SIGKILL)
        let third = try GatewayProcess(config: config, logURL: env.directory.appendingPathComponent("third.log"))
        try await third.start()
        #expect(try await third.stop(SIGTERM))
        #expect(third.process.terminationStatus == 0)
    }

    /// A store holding one iAd record, put there by `import` from the JSON Lines file returned.
    func importOneRecord(_ env: TestEnvironment, _ config: String) async throws -> String {
        let lines = env.directory.appendingPathComponent("one.jsonl").path
        try IAdPayloads.attributed(user: "u1").replacingOccurrences(of: "\n", with: "")
            .write(toFile: lines, atomically: true, encoding: .utf8)
        #expect(try await run(["import", "--provider", "iad", "--config", config, lines]).status == 0)
        return lines
    }

    @Test func aStoreThatFailsWhileBeingReadIsNamedWithItsKey() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = try env.writeConfig()
        _ = try await importOneRecord(env, config)
        // A store damaged after it opened: its records can no longer be read.
        try await DatabaseQueue(path: env.databasePath).write { db in try db.execute(sql: "DROP TABLE records") }
        for command in [["report", "keywords"], ["replay", "--sink", "local"]] {
            let result = try await run(command + ["--config", config])
            #expect(result.status == 1, "\(command)")
            #expect(
                result.stderr.hasPrefix(
                    "cannot use the store at \(env.databasePath) (storage.sqlite.path): SQLite error"),
                "\(command): \(result.stderr)")
        }
    }

    @Test func aStoreFromANewerVersionStopsEveryCommandButBackup() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = try env.writeConfig()
        let lines = try await importOneRecord(env, config)
        // What a later release's migration leaves, as this release's would.
        try await DatabaseQueue(path: env.databasePath).write { db in
            try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('store-v99-later')")
        }
        let commands = [
            ["serve"], ["import", "--provider", "iad", lines], ["report", "keywords"], ["dlq", "list"],
            ["replay", "--sink", "local"],
        ]
        for command in commands {
            let result = try await run(command + ["--config", config])
            #expect(result.status == 1, "\(command)")
            #expect(
                result.stderr.contains(
                    "cannot use the store at \(env.databasePath) (storage.sqlite.path): a newer attribution-gateway "
                        + "upgraded it (store-v99-later, which this version does not know)"),
                "\(command): \(result.stderr)")
        }
        let copy = env.directory.appendingPathComponent("copy.sqlite").path
        let backup = try await run(["backup", "--config", config, "--to", copy])
        #expect(backup.status == 0, "\(backup.stderr)")
        #expect(backup.stdout.hasPrefix("backed up 1 records"), "\(backup.stdout)")
    }

    @Test func aCommandOfANewerVersionDoesNotUpgradeTheStoreUnderARunningServer() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = try env.writeConfig()
        let server = try GatewayProcess(config: config, logURL: env.directory.appendingPathComponent("serve.log"))
        try await server.start()
        let (status, _) = try await server.post("/v1/iad", body: IAdPayloads.attributed(user: "older-server"))
        #expect(status == 202)
        // The test's own connection waits for the server's writer (its commits, its
        // checkpoints) as the server's connections wait for each other.
        var waiting = Configuration()
        waiting.busyMode = .timeout(10)
        let beside = try DatabaseQueue(path: env.databasePath, configuration: waiting)
        // The running server as an older release: its tables lack this release's last upgrade.
        let last = try await beside.write { db in
            let last = try String.fetchOne(
                db, sql: "SELECT identifier FROM grdb_migrations ORDER BY rowid DESC LIMIT 1")!
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = ?", arguments: [last])
            return last
        }
        let report = try await run(["report", "keywords", "--config", config])
        #expect(report.status == 1)
        #expect(
            report.stderr.contains(
                "it needs this version's upgrade (\(last)), and a gateway (pid \(server.process.processIdentifier)) of an "
                    + "older version is serving it"), "\(report.stderr)")
        let applied = try await beside.read { db in
            try String.fetchSet(db, sql: "SELECT identifier FROM grdb_migrations")
        }
        #expect(!applied.contains(last))
        // The server goes on (SchemaUpgradeTests: with no server, the command upgrades the store).
        let (after, _) = try await server.post("/v1/iad", body: IAdPayloads.attributed(user: "older-server-2"))
        #expect(after == 202)
        #expect(try await server.stop(SIGTERM))
        #expect(server.process.terminationStatus == 0)
    }

    @Test func aStorePathThatCannotHoldAStoreIsNamedWithItsKey() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let file = env.directory.appendingPathComponent("a-file").path
        try "not a folder".write(toFile: file, atomically: true, encoding: .utf8)
        let lines = env.directory.appendingPathComponent("empty.jsonl").path
        try "".write(toFile: lines, atomically: true, encoding: .utf8)
        let cases = [
            ("\(file)/gateway.sqlite", "\(file) is a file, not a folder"),
            (env.directory.path, "it is a folder"),
        ]
        for (path, reason) in cases {
            let config = env.directory.appendingPathComponent("bad.yaml").path
            try "storage: { sqlite: { path: \(path) } }\nproviders: { iad: {} }\nsinks: { local: { type: sqlite } }\n"
                .write(toFile: config, atomically: true, encoding: .utf8)
            for command in [["serve"], ["import", "--provider", "iad", lines]] {
                let result = try await run(command + ["--config", config])
                #expect(result.status != 0, "\(command) \(path)")
                #expect(
                    result.stderr.contains("cannot use the store at \(path) (storage.sqlite.path): \(reason)"),
                    "\(command): \(result.stderr)")
            }
        }
    }

    @Test func serveNamesWhereAnAuthIssueIsWithoutQuotingTheKey() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let secret = "LiteralKey-0123456789-abcdef"
        let config = env.directory.appendingPathComponent("typo.yaml").path
        // A missing colon makes the key part of the key's name, and so of the message.
        try
            (env.yaml().replacingOccurrences(of: "port: 0", with: "port: abc")
            + "\nauth: { api_keys: [ { app_id: \"1234567890\", key \"\(secret)\" } ] }\n")
            .write(toFile: config, atomically: true, encoding: .utf8)
        let served = try await run(["serve", "--config", config])
        #expect(served.status == 1)
        #expect(!served.stderr.contains(secret), "\(served.stderr)")
        #expect(served.stderr.contains("auth: a problem here") && served.stderr.contains("check-config"))
        // Other issues are shown whole.
        #expect(served.stderr.contains("server.port: expected an integer, found 'abc'"), "\(served.stderr)")
        // check-config, run by the operator, shows everything.
        let checked = try await run(["check-config", config])
        #expect(checked.status == 1 && checked.stderr.contains(secret))
    }

    @Test func aBackupTakenUnderLoadHoldsEveryAcknowledgedRecordAndRestores() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = try env.writeConfig()
        let gateway = try GatewayProcess(config: config, logURL: env.directory.appendingPathComponent("serve.log"))
        try await gateway.start()
        func post(_ user: String) async throws -> String? {
            let (status, answer) = try await gateway.post("/v1/iad", body: IAdPayloads.attributed(user: user))
            return status == 202 ? answer["record_id"] as? String : nil
        }
        // Enough records for the copy to take several steps (256 pages each).
        var before: [String] = []
        for index in 0..<400 { before.append(try #require(try await post("before-\(index)"))) }

        // Ingest goes on around the copy. Whether commits between its steps restart or enter
        // it, StoreBackupTests shows deterministically; this is the command end to end.
        let copy = env.directory.appendingPathComponent("backups/copy.sqlite").path
        try FileManager.default.createDirectory(
            atPath: (copy as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let finished = Flag()
        let backup = Task {
            defer { finished.set() }
            return try await self.run(["backup", "--config", config, "--to", copy])
        }
        var during = 0
        while !finished.isSet {
            _ = try await post("during-\(during)")
            during += 1
        }
        let result = try await backup.value
        #expect(result.status == 0, "\(result.stderr)")
        #expect(during > 0)

        // One self-contained file, whole, holding every record acknowledged before it began.
        #expect(!FileManager.default.fileExists(atPath: copy + "-wal"))
        #expect(!FileManager.default.fileExists(atPath: copy + ".partial"))
        let queue = try DatabaseQueue(path: copy)
        let (check, mode, pages, ids) = try await queue.read { db in
            (
                try String.fetchAll(db, sql: "PRAGMA integrity_check"),
                try String.fetchOne(db, sql: "PRAGMA journal_mode"),
                try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0,
                Set(try String.fetchAll(db, sql: "SELECT record_id FROM records"))
            )
        }
        #expect(check == ["ok"])
        #expect(mode == "delete")
        #expect(pages > 256, "the copy took one step only")
        #expect(Set(before).isSubset(of: ids))
        #expect(ids.count <= before.count + during)
        #expect(result.stdout.contains("backed up \(ids.count) records"), "\(result.stdout)")

        // Never over a file: not an earlier backup, not the store itself.
        for target in [copy, env.databasePath] {
            let refused = try await run(["backup", "--config", config, "--to", target])
            #expect(refused.status == 1, "\(target)")
            #expect(refused.stderr.contains("backup not taken: \(target) exists"), "\(refused.stderr)")
        }
        #expect(try await queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM records") } == ids.count)
        try queue.close()

        // Restored, it is the store: a record from before the backup is known as a duplicate.
        #expect(try await gateway.stop(SIGTERM))
        let restored = env.directory.appendingPathComponent("restored.yaml").path
        try env.yaml(logLevel: "info").replacingOccurrences(of: env.databasePath, with: copy)
            .write(toFile: restored, atomically: true, encoding: .utf8)
        let second = try GatewayProcess(config: restored, logURL: env.directory.appendingPathComponent("restored.log"))
        try await second.start()
        let (status, answer) = try await second.post("/v1/iad", body: IAdPayloads.attributed(user: "before-7"))
        #expect(status == 200 && answer["status"] as? String == "duplicate", "\(status) \(answer)")
        #expect(answer["record_id"] as? String == before[7])
        #expect(try await second.stop(SIGTERM))
    }
}

/// Set once, read from any task.
final class Flag: Sendable {
    private let state = Mutex(false)
    var isSet: Bool { state.withLock { $0 } }
    func set() { state.withLock { $0 = true } }
}

extension CommandLineTests {
    /// A port already taken is said plainly, before the store is opened or made: NIO's own
    /// message named neither the address nor the setting, after the workers had started.
    @Test func servingOnATakenPortSaysWhichAndLeavesNoStore() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let taken = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(taken) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(taken, $0, length) == 0 && getsockname(taken, $0, &length) == 0
            }
        }
        let listening = Glibc.listen(taken, 1) == 0
        try #require(bound && listening)
        let port = Int(UInt16(bigEndian: address.sin_port))
        let config = env.directory.appendingPathComponent("taken.yaml").path
        try env.yaml(port: port, logLevel: "info").write(toFile: config, atomically: true, encoding: .utf8)
        let result = try await run(["serve", "--config", config])
        #expect(result.status == 1)
        #expect(
            result.stderr.contains("cannot listen on 127.0.0.1:\(port) (server.host, server.port)"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: env.databasePath))
    }
}
