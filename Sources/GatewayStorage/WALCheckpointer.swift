import GRDB
import Logging
import ServiceLifecycle

/// Copies committed pages from the write-ahead log into the database file on a
/// connection of its own, off the commit path.
///
/// SQLite's automatic checkpoint runs inside the commit that crosses its threshold (1,000
/// pages), so every few hundred requests one of them waited for a checkpoint and its
/// fsync: at half of iAd's reached rate that set the p99 (12.6 ms; 4.3 ms with the
/// checkpoints moved here, `Benchmarks/run`). The writer keeps a distant automatic
/// threshold as a backstop, should this fall behind.
public final class WALCheckpointer: Service, Sendable {
    /// The writer's own threshold while this runs, in pages (about 16 MB of log).
    static let backstopPages = 4_096
    /// SQLite's default, put back when this stops.
    static let defaultPages = 1_000

    let path: String
    let writer: DatabasePool
    let interval: Duration
    let logger: Logger

    public init(store: SQLiteStore, interval: Duration = .milliseconds(10), logger: Logger) {
        path = store.path
        writer = store.pool
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        let checkpointer = try DatabaseQueue(path: path)
        try await setWriterThreshold(Self.backstopPages)
        var lastWarning: ContinuousClock.Instant?
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            try? await Task.sleep(for: interval)
            do {
                // PASSIVE waits for no reader and no writer: commits go on meanwhile.
                try await checkpointer.writeWithoutTransaction { db in
                    try db.execute(sql: "PRAGMA wal_checkpoint(PASSIVE)")
                }
            } catch is CancellationError {
                break
            } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY {
                continue  // another connection is checkpointing (the writer's backstop, an import)
            } catch {
                // A lasting fault (a full disk) would otherwise log a hundred lines a second.
                if lastWarning.map({ $0.duration(to: .now) > .seconds(60) }) ?? true {
                    lastWarning = .now
                    logger.warning(
                        "WAL checkpoint failed; the writer's own checkpoints take over at the backstop",
                        metadata: ["error": "\(error)"])
                }
            }
        }
        // In a task of its own: this one is cancelled, and GRDB's async calls would refuse.
        try? await Task { try await setWriterThreshold(Self.defaultPages) }.value
    }

    private func setWriterThreshold(_ pages: Int) async throws {
        try await writer.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(pages)")
        }
    }
}
