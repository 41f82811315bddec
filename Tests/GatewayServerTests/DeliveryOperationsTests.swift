import Foundation
import GatewayCore
import GatewayStorage
import GRDB
import Testing

/// `replay` and `dlq`, the commands an operator uses when a sink was added late or gave up.
@Suite struct DeliveryOperationsTests {
    let cli = CommandLineTests()

    /// Two sinks: `local` gets every record; `late` is routed nothing, as a sink added later.
    func writeConfig(_ env: TestEnvironment) throws -> String {
        let path = env.directory.appendingPathComponent("ops.yaml").path
        try """
        storage: { sqlite: { path: \(env.databasePath), durability: normal } }
        providers: { iad: { enabled: true } }
        sinks:
          local: { type: sqlite, paused: true }
          late: { type: sqlite, path: \(env.directory.appendingPathComponent("late.sqlite").path) }
        routes:
          - sinks: [local]
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func importUsers(_ users: [String], env: TestEnvironment, config: String) throws {
        let file = env.directory.appendingPathComponent("\(UUID()).jsonl").path
        try users.map { IAdPayloads.attributed(user: $0).replacingOccurrences(of: "\n", with: "") }
            .joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let result = try cli.run(["import", "--provider", "iad", "--config", config, file])
        #expect(result.status == 0, "\(result.stderr)")
    }

    @Test func replayQueuesStoredRecordsForOneSinkOnce() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = try writeConfig(env)
        try importUsers(["r1", "r2", "r3"], env: env, config: config)

        let first = try cli.run(["replay", "--config", config, "--sink", "late"])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("3 of 3 records queued for late"))
        // Already waiting: not queued twice.
        let again = try cli.run(["replay", "--config", config, "--sink", "late", "--provider", "iad"])
        #expect(again.stdout.contains("0 of 3 records queued for late"))
        let future = try cli.run(["replay", "--config", config, "--sink", "late", "--since", "2999-01-01T00:00Z"])
        #expect(future.stdout.contains("0 of 0 records queued"))

        let stats = try await SQLiteStore(path: env.databasePath).outboxStats()
        #expect(stats["late"]?.depth == 3)
        #expect(stats["local"]?.depth == 3)

        let unknown = try cli.run(["replay", "--config", config, "--sink", "nowhere"])
        #expect(unknown.status != 0)
        #expect(unknown.stderr.contains("no sink 'nowhere'"))
    }

    @Test func deadLettersCanBeListedRetriedAndDropped() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = try writeConfig(env)
        try importUsers(["d1", "d2"], env: env, config: config)

        // The sink gives up on both records.
        let store = try SQLiteStore(path: env.databasePath)
        let entries = try await store.dueEntries(sink: "local", now: Date(), limit: 10)
        #expect(entries.count == 2)
        try await store.resolve(
            sink: "local", entries.map { .deadLetter(id: $0.id, attempts: 10, error: "answered 400") }, now: Date())

        let list = try cli.run(["dlq", "list", "--config", config])
        let lines = list.stdout.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines.allSatisfy { $0.contains(#""error":"answered 400""#) && $0.contains(#""sink":"local""#) })

        let refused = try cli.run(["dlq", "drop", "--config", config])
        #expect(refused.status != 0)
        #expect(try await store.deadLetters(sink: nil, limit: 10).count == 2)

        let letters = try await store.deadLetters(sink: nil, limit: 10)
        let retried = try cli.run(["dlq", "retry", "--config", config, "--id", String(letters[0].id)])
        #expect(retried.stdout.contains("1 dead letters queued"))
        #expect(try await store.outboxStats()["local"]?.depth == 1)

        // A sink taken out of config.yaml still has its dead letters to look at.
        let without = env.directory.appendingPathComponent("without-local.yaml").path
        try "storage: { sqlite: { path: \(env.databasePath) } }\nproviders: { iad: {} }\nsinks: { other: { type: sqlite } }\n"
            .write(toFile: without, atomically: true, encoding: .utf8)
        let removed = try cli.run(["dlq", "list", "--config", without, "--sink", "local"])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stdout.split(separator: "\n").count == 1)
        // A misspelt sink is an error, not "0 dead letters".
        for verb in ["list", "retry", "drop"] {
            let typo = try cli.run(["dlq", verb, "--config", config, "--sink", "locl"])
            #expect(typo.status == 1, "\(verb)")
            #expect(typo.stderr.contains("no sink 'locl'"), "\(verb): \(typo.stderr)")
        }

        let dropped = try cli.run(["dlq", "drop", "--config", config, "--sink", "local"])
        #expect(dropped.stdout.contains("1 dead letters dropped"))
        #expect(try await store.deadLetters(sink: nil, limit: 10).isEmpty)
    }
}
