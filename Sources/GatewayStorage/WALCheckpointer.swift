import GRDB
import GatewayCore
import Logging
import ServiceLifecycle

/// Copies committed pages from the write-ahead log into the database file on a
/// connection of its own, off the commit path.
///
/// SQLite's automatic checkpoint runs inside the commit that crosses its threshold (1,000
/// pages), so every few hundred requests one of them would wait for a checkpoint and its
/// fsync, and those requests would set the tail latency. The writer keeps a distant
/// automatic threshold as a backstop, should this fall behind.
///
/// Every 5 ms rather than 10: each checkpoint then has half the pages to copy and sync,
/// and the commits wait less behind it; more often gains little and costs CPU per
/// request. (The figures are in `Benchmarks/HISTORY.md`.)
public final class WALCheckpointer: Service, Sendable {
    /// The writer's own threshold while this runs, in pages (about 16 MB of log).
    static let backstopPages = 4_096
    /// SQLite's default, put back when this stops.
    static let defaultPages = 1_000

    let path: String
    let durability: SQLiteDatabase.Durability
    let writer: DatabasePool
    /// How often to checkpoint while commits come in; idle, the wait doubles up to a second.
    let interval: Duration
    let logger: Logger

    public init(store: SQLiteStore, interval: Duration = .milliseconds(5), logger: Logger) {
        path = store.path
        durability = store.durability
        writer = store.pool
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        let checkpointer: DatabaseQueue
        do {
            var configuration = Configuration()
            // A checkpoint syncs the database file before the log may be reused; with
            // the store's own setting, never weaker than what its commits promised.
            // (A DatabaseQueue keeps what `prepareDatabase` sets; a pool's writer would not.)
            configuration.prepareDatabase { [durability] db in
                try db.execute(sql: "PRAGMA synchronous = \(durability.synchronous)")
            }
            checkpointer = try DatabaseQueue(path: path, configuration: configuration)
            try await setWriterThreshold(Self.backstopPages)
        } catch {
            // The writer keeps SQLite's own checkpoints: slower commits, nothing lost.
            logger.error(
                "WAL checkpointer not started; commits checkpoint as SQLite does", metadata: ["error": "\(error)"])
            // Returning would end the service group, the server with it.
            try? await gracefulShutdown()
            return
        }
        let warnings = OncePerInterval(.seconds(60))
        var wait = interval
        var lastFrames = -1
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            try? await Task.sleep(for: wait)
            do {
                // PASSIVE waits for no reader and no writer: commits go on meanwhile. Its
                // row: busy (another checkpoint ran), frames in the log, frames copied.
                let row = try checkpointer.writeWithoutTransaction { db in
                    try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(PASSIVE)")
                }
                let frames: Int = row?[1] ?? 0
                let copied: Int = row?[2] ?? 0
                // Nothing written since the last time: no need to look a hundred times a second.
                let idle = frames == lastFrames && copied == frames
                wait = idle ? min(wait * 2, .seconds(1)) : interval
                lastFrames = frames
            } catch is CancellationError {
                break
            } catch {
                // A lasting fault (a full disk) would otherwise log a hundred lines a second.
                if warnings.allow() {
                    logger.warning(
                        "WAL checkpoint failed; the writer's own checkpoints take over at the backstop",
                        metadata: ["error": "\(error)"])
                }
            }
        }
        try? await uncancelled { try await self.setWriterThreshold(Self.defaultPages) }
        await truncateLog(checkpointer)
    }

    /// On the way out, every page of the log into the database file and the log cut to
    /// nothing: a stopped gateway otherwise left a log of its high-water size (up to the
    /// 16 MB backstop) beside the store, whose pages a copy of the file alone would miss.
    private func truncateLog(_ checkpointer: DatabaseQueue) async {
        do {
            let busy = try await uncancelled {
                try await checkpointer.writeWithoutTransaction { db in
                    try Int.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)") ?? 0
                }
            }
            // Busy: a reader (`report`, `replay` in another process) still needs the log.
            if busy != 0 {
                logger.info("write-ahead log left in place: a reader (another process) or a late write still uses it")
            }
        } catch {
            logger.warning(
                "write-ahead log not truncated at shutdown", metadata: ["error": "\(CommitHealth.describe(error))"])
        }
    }

    private func setWriterThreshold(_ pages: Int) async throws {
        try await writer.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(pages)")
        }
    }
}
