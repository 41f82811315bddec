import Foundation
import GRDB
import Synchronization

/// Opens SQLite files in WAL mode, one pool per file per process, so that the store and
/// the SQLite sink share a connection pool (and its single writer) when they share a file.
public enum SQLiteDatabase {
    /// How much SQLite waits for the disk on commit.
    public enum Durability: String, Sendable, CaseIterable {
        /// fsync on every commit: an acknowledged record survives power loss.
        case full
        /// fsync at checkpoints: survives a process crash, may lose the last commits on power loss.
        case normal

        /// The `PRAGMA synchronous` value that gives it.
        var synchronous: String { self == .full ? "FULL" : "NORMAL" }
    }

    final class WeakPool: @unchecked Sendable {
        weak var pool: DatabasePool?
        init(_ pool: DatabasePool) { self.pool = pool }
    }

    private static let pools = Mutex<[String: WeakPool]>([:])

    /// The pool for `path`, opened (and its folder created) on first use. A `durability`
    /// is applied to the pool's writer even when the pool is already open, so that the
    /// store, which passes the configured one, decides it whoever opened the file first;
    /// nil (sinks, caches) leaves an open pool's as it is and opens a new one with `full`.
    public static func pool(path: String, durability: Durability? = nil) throws -> DatabasePool {
        let url = URL(fileURLWithPath: path).standardizedFileURL
        try createPrivately(url)
        let (pool, wasOpen) = try pools.withLock { pools -> (DatabasePool, Bool) in
            if let pool = pools[url.path]?.pool { return (pool, true) }
            var configuration = Configuration()
            // Another process (the CLI's import) may hold the write lock for a moment.
            configuration.busyMode = .timeout(10)
            let pool = try DatabasePool(path: url.path, configuration: configuration)
            // On the writer, after the pool is open: GRDB turns WAL on after running
            // `prepareDatabase` and then sets `synchronous = NORMAL` itself, which would
            // silently undo a setting made there (commits were not synced until the next
            // checkpoint). Readers never commit, so only the writer's setting counts.
            try setSynchronous(durability ?? .full, on: pool)
            pools[url.path] = WeakPool(pool)
            return (pool, false)
        }
        // Outside the lock: an open pool's writer may be busy, and waiting for it while
        // holding every file's lock would stall the other files' openers.
        if wasOpen, let durability { try setSynchronous(durability, on: pool) }
        return pool
    }

    /// The store holds AdServices tokens until Apple answers, user ids and raw payloads,
    /// as its backups do (made 0600): a new folder is the owner's alone and a new file
    /// readable by the owner only, whatever the umask. SQLite gives its `-wal` and `-shm`
    /// the database file's mode. Existing files keep theirs.
    static func createPrivately(_ url: URL) throws {
        try FileManager.default.createDirectory(
            at: url.deletingLastPathComponent(), withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        let descriptor = open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if descriptor >= 0 { close(descriptor) }
    }

    private static func setSynchronous(_ durability: Durability, on pool: DatabasePool) throws {
        try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = \(durability.synchronous)")
        }
    }
}
