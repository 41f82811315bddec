import ArgumentParser
import Foundation
import GatewayStorage

struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy the store to a file, consistently, while the gateway runs.",
        discussion: """
            Copies one committed moment of storage.sqlite.path (records, outboxes, dead letters, \
            pending tokens, the keyword cache, and the SQLite sink's table when it shares the file) \
            with SQLite's online backup; ingest goes on meanwhile, and the store's write-ahead log \
            grows until the copy ends. The copy is checked and synced before it appears under its \
            name, readable by its owner only, and it is one file. An existing file is never \
            replaced. To restore: stop the \
            gateway, put the copy at storage.sqlite.path (removing any PATH-wal and PATH-shm left \
            there), start it. Its first start moves what the copy's outboxes hold for S2S vendors \
            (which count every event they are sent) and for sinks its config does not name to the \
            dead letters: check each destination, then dlq retry.
            """)

    @Option(name: .shortAndLong, help: "The configuration file.")
    var config = "config.yaml"
    @Option(help: "The file to write; it must not exist.")
    var to: String

    func run() async throws {
        let configuration = try loadConfiguration(config, enrichers: false)
        let started = ContinuousClock.now
        guard configuration.storage.postgres == nil else {
            printError(
                "backup copies the SQLite store; back a PostgreSQL store up with the database's own tools (pg_dump)")
            throw ExitCode(1)
        }
        let summary = try await withExistingStore(configuration, upgrade: .never) { opened in
            guard let store = opened as? SQLiteStore else { throw ExitCode(1) }
            var progress: ProgressBar?
            do {
                let summary = try StoreBackup.copy(store, to: to) { copied, total in
                    if progress == nil { progress = ProgressBar(total: total, label: "backing up (pages)") }
                    progress?.advance(to: copied)
                }
                progress?.finish()
                return summary
            } catch let refusal as StoreBackup.Refusal {
                progress?.finish()
                printError("backup not taken: \(refusal)")
                throw ExitCode(1)
            }
        }
        let seconds = (ContinuousClock.now - started) / .seconds(1)
        let megabytes = Double(summary.bytes) / 1_048_576
        print(
            "backed up \(summary.records) records (\(String(format: "%.1f", megabytes)) MB) to \(summary.path)"
                + " in \(String(format: "%.1f", seconds)) s")
    }
}
