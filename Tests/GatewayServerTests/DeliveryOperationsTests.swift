import Foundation
import GatewayCore
import GatewayStorage
import GRDB
import Testing

/// `replay` and `dlq`, the commands an operator uses when a sink was added late or gave up.
@Suite struct DeliveryOperationsTests {
    let cli = CommandLineTests()

    /// Two sinks: `local` gets every record; `late` is routed nothing, as a sink not yet in
    /// use, or, with `lateRoute`, the records of one app, as once it is added.
    func writeConfig(_ env: TestEnvironment, lateRoute: String? = nil) throws -> String {
        let path = env.directory.appendingPathComponent("ops-\(lateRoute == nil ? "before" : "after").yaml").path
        try """
        storage: { sqlite: { path: \(env.databasePath), durability: normal } }
        providers: { iad: { enabled: true } }
        sinks:
          local: { type: sqlite, paused: true }
          late: { type: sqlite, path: \(env.directory.appendingPathComponent("late.sqlite").path) }
        routes:
          - sinks: [local]
        \(lateRoute.map { "  - { sinks: [late], where: { app_id: \"\($0)\" } }" } ?? "")
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func importUsers(_ users: [String], appID: String = "1234567890", env: TestEnvironment, config: String) async throws
    {
        let file = env.directory.appendingPathComponent("\(UUID()).jsonl").path
        try users.map { IAdPayloads.attributed(user: $0, appID: appID).replacingOccurrences(of: "\n", with: "") }
            .joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let result = try await cli.run(["import", "--provider", "iad", "--config", config, file])
        #expect(result.status == 0, "\(result.stderr)")
    }

    @Test func importReadsAFileThroughASymbolicLink() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = try writeConfig(env)
        let file = env.directory.appendingPathComponent("history.jsonl").path
        try (1...50).map { IAdPayloads.attributed(user: "l\($0)").replacingOccurrences(of: "\n", with: "") }
            .joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let link = env.directory.appendingPathComponent("link.jsonl").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: file)
        let result = try await cli.run(["import", "--provider", "iad", "--config", config, link])
        #expect(result.status == 0, "\(result.stderr)")
        let store = try SQLiteStore(path: env.databasePath, durability: .normal)
        #expect(try await store.countRecords(matching: .init()) == 50)
    }

    @Test func replayQueuesTheStoredRecordsRoutedToOneSinkOnce() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let before = try writeConfig(env)
        try await importUsers(["r1", "r2"], env: env, config: before)
        try await importUsers(["r3"], appID: "222", env: env, config: before)

        // Routed nothing, it is queued nothing: replay sends only what the routes would.
        let unrouted = try await cli.run(["replay", "--config", before, "--sink", "late"])
        #expect(unrouted.status == 0, "\(unrouted.stderr)")
        #expect(unrouted.stdout.contains("0 of 3 records queued for late (3 not routed to it)"), "\(unrouted.stdout)")

        let after = try writeConfig(env, lateRoute: "222")
        let first = try await cli.run(["replay", "--config", after, "--sink", "late"])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("1 of 3 records queued for late (2 not routed to it)"), "\(first.stdout)")
        // Already waiting: not queued twice.
        let again = try await cli.run(["replay", "--config", after, "--sink", "late", "--provider", "iad"])
        #expect(
            again.stdout.contains("0 of 3 records queued for late (2 not routed to it, 1 already waiting for it)"),
            "\(again.stdout)")
        let future = try await cli.run(["replay", "--config", after, "--sink", "late", "--since", "2999-01-01T00:00Z"])
        #expect(future.stdout.contains("0 of 0 records queued"))
        // A bare date is that day's midnight UTC; a time without its zone is refused, naming the fix.
        let date = try await cli.run(["replay", "--config", after, "--sink", "late", "--since", "2999-01-01"])
        #expect(date.status == 0 && date.stdout.contains("0 of 0 records queued"), "\(date.stderr)")
        let zoneless = try await cli.run([
            "replay", "--config", after, "--sink", "late", "--since", "2999-01-01T00:00:00",
        ])
        #expect(zoneless.status == 64 && zoneless.stderr.contains("--since needs a time zone"), "\(zoneless.stderr)")

        let stats = try await SQLiteStore(path: env.databasePath).outboxStats()
        #expect(stats["late"]?.depth == 1)
        #expect(stats["local"]?.depth == 3)
        let config = after

        let unknown = try await cli.run(["replay", "--config", config, "--sink", "nowhere"])
        #expect(unknown.status != 0)
        #expect(unknown.stderr.contains("no sink 'nowhere'"))
        // A misspelt provider matched nothing and said "0 of 0 records queued".
        let misspelt = try await cli.run(["replay", "--config", config, "--sink", "local", "--provider", "adservice"])
        #expect(misspelt.status != 0)
        #expect(misspelt.stderr.contains("no provider 'adservice'; known: adservices"), "\(misspelt.stderr)")
    }

    @Test func replayToAVendorThatNeedsConsentQueuesOnlyConsentedEvents() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let path = env.directory.appendingPathComponent("vendor.yaml").path
        // The vendor's endpoint is never reached: nothing runs but the commands.
        try """
        storage: { sqlite: { path: \(env.databasePath), durability: normal } }
        providers:
          s2s:
            vendor: [appsflyer]
            vendors: { appsflyer: { api_key: "AF-KEY", endpoint: "http://127.0.0.1:9", require_consent: true } }
        sinks: { local: { type: sqlite, paused: true } }
        """.write(toFile: path, atomically: true, encoding: .utf8)
        let events = env.directory.appendingPathComponent("events.jsonl").path
        try (1...3).map { status in
            #"{"type":"event","name":"level_up","app_id":"1111111111","app_user_id":"u","event_id":"e\#(status)","att_status":\#(status)}"#
        }.joined(separator: "\n").write(toFile: events, atomically: true, encoding: .utf8)
        let imported = try await cli.run(["import", "--provider", "s2s", "--config", path, events])
        #expect(imported.status == 0, "\(imported.stderr)")
        let store = try SQLiteStore(path: env.databasePath)
        // The routes queued the consented event alone; a replay must not add the others.
        #expect(try await store.outboxStats()["s2s.appsflyer"]?.depth == 1)
        try await store.resolve(
            sink: "s2s.appsflyer",
            try await store.dueEntries(sink: "s2s.appsflyer", now: Date(), limit: 10).map { .delivered(id: $0.id) },
            now: Date())

        let replay = try await cli.run(["replay", "--config", path, "--sink", "s2s.appsflyer"])
        #expect(replay.status == 0, "\(replay.stderr)")
        #expect(
            replay.stdout.contains("1 of 3 records queued for s2s.appsflyer (2 not routed to it)"), "\(replay.stdout)")
        let queued = try await store.dueEntries(sink: "s2s.appsflyer", now: Date(), limit: 10)
        #expect(queued.map(\.record.attStatus) == [3])
    }

    @Test func deadLettersCanBeListedRetriedAndDropped() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = try writeConfig(env)
        try await importUsers(["d1", "d2"], env: env, config: config)

        // The sink gives up on both records.
        let store = try SQLiteStore(path: env.databasePath)
        let entries = try await store.dueEntries(sink: "local", now: Date(), limit: 10)
        #expect(entries.count == 2)
        try await store.resolve(
            sink: "local", [.deadLetter(id: entries[0].id, attempts: 10, error: "answered 400")], now: Date())
        // A receiver's answer is kept as the error, and printed: a C1 CSI or a bidi
        // override in it would act on the terminal, so they are written as JSON escapes.
        try await store.resolve(
            sink: "local",
            [.deadLetter(id: entries[1].id, attempts: 10, error: "answered 400 \u{9B}2J\u{202E}gnp.exe")],
            now: Date())

        let list = try await cli.run(["dlq", "list", "--config", config])
        let lines = list.stdout.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines.allSatisfy { $0.contains(#""error":"answered 400"#) && $0.contains(#""sink":"local""#) })
        #expect(list.stdout.contains(#""error":"answered 400 \u009b2J\u202egnp.exe""#), "\(list.stdout)")
        #expect(!list.stdout.unicodeScalars.contains { $0.value == 0x9B || $0.value == 0x202E })
        let parsed = try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any]
        #expect(parsed?["error"] as? String == "answered 400 \u{9B}2J\u{202E}gnp.exe")
        // Numbers are JSON numbers, so that `jq 'select(.attempts > 2)'` compares them.
        #expect(lines.allSatisfy { $0.contains(#""attempts":10,"#) })
        // An id is found past the newest `--limit` letters.
        let oldest = try #require(try await store.deadLetters(sink: nil, limit: 10).last)
        let byID = try await cli.run(["dlq", "list", "--config", config, "--id", String(oldest.id), "--limit", "1"])
        #expect(byID.stdout.contains(#""id":\#(oldest.id),"#), "\(byID.stdout)")

        let refused = try await cli.run(["dlq", "drop", "--config", config])
        #expect(refused.status != 0)
        #expect(try await store.deadLetters(sink: nil, limit: 10).count == 2)

        let letters = try await store.deadLetters(sink: nil, limit: 10)
        let retried = try await cli.run(["dlq", "retry", "--config", config, "--id", String(letters[0].id)])
        #expect(retried.stdout.contains("1 dead letters queued"))
        #expect(try await store.outboxStats()["local"]?.depth == 1)

        // A sink taken out of config.yaml still has its dead letters to look at.
        let without = env.directory.appendingPathComponent("without-local.yaml").path
        try
            "storage: { sqlite: { path: \(env.databasePath) } }\nproviders: { iad: {} }\nsinks: { other: { type: sqlite } }\n"
            .write(toFile: without, atomically: true, encoding: .utf8)
        let removed = try await cli.run(["dlq", "list", "--config", without, "--sink", "local"])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stdout.split(separator: "\n").count == 1)
        // …but is not moved to an outbox no worker drains (it left `dlq list` and went nowhere).
        let nowhere = try await cli.run(["dlq", "retry", "--config", without, "--all"])
        #expect(nowhere.status == 0, "\(nowhere.stderr)")
        #expect(nowhere.stdout.contains("0 dead letters queued"), "\(nowhere.stdout)")
        #expect(nowhere.stdout.contains("1 left for sinks no longer in the config (local)"), "\(nowhere.stdout)")
        #expect(try await cli.run(["dlq", "retry", "--config", without, "--sink", "local"]).status == 1)
        #expect(try await store.deadLetters(sink: "local", limit: 10).count == 1)
        #expect(try await store.outboxStats()["local"]?.depth == 1)
        // A misspelt sink is an error, not "0 dead letters".
        for verb in ["list", "retry", "drop"] {
            let typo = try await cli.run(["dlq", verb, "--config", config, "--sink", "locl"])
            #expect(typo.status == 1, "\(verb)")
            #expect(typo.stderr.contains("no sink 'locl'"), "\(verb): \(typo.stderr)")
        }

        // A replay that queues a dead-lettered record again retries it: its dead letter goes,
        // and no later `dlq retry` can send it once more.
        let dead = try #require(try await store.deadLetters(sink: "local", limit: 10).first)
        let replayed = try await cli.run(["replay", "--config", config, "--sink", "local"])
        #expect(replayed.stdout.contains("1 of 2 records queued for local"), "\(replayed.stdout)")
        #expect(try await store.deadLetters(sink: nil, limit: 10).isEmpty)
        let queued = try await store.dueEntries(sink: "local", now: Date(), limit: 10)
        #expect(Set(queued.map(\.record.recordID)).contains(dead.recordID))
        // It fails again: one dead letter, as before the replay.
        try await store.resolve(
            sink: "local",
            queued.filter { $0.record.recordID == dead.recordID }
                .map { .deadLetter(id: $0.id, attempts: 10, error: "answered 400 again") }, now: Date())
        #expect(try await store.deadLetters(sink: "local", limit: 10).map(\.recordID) == [dead.recordID])

        let dropped = try await cli.run(["dlq", "drop", "--config", config, "--sink", "local"])
        #expect(dropped.stdout.contains("1 dead letters dropped"))
        #expect(try await store.deadLetters(sink: nil, limit: 10).isEmpty)
    }
}
