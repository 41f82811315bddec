import Foundation
import Synchronization

/// The claim of the one server that delivers from a store: an exclusive `flock` on a file
/// beside the store, held while `serve` runs. Two servers draining one SQLite outbox would
/// each offer every record to every sink; the second refuses to start instead. The kernel
/// drops the lock when the process ends, however it ends (a `SIGKILL` included), so a
/// crash never leaves a stale claim behind.
///
/// The file says who holds it and why (`PID` then `serving` or `upgrading`), so that a
/// server starting while a command upgrades the store's tables waits for it rather than
/// refusing, and a command can tell an older server from one upgrading right now.
public final class ServeLock: Sendable {
    /// Why the lock is held.
    public enum Role: String, Sendable {
        /// `serve` runs on the store.
        case serving
        /// A command (or `serve`, before it serves) is upgrading the store's tables.
        case upgrading
    }

    /// The lock file's path: the store file's own (links resolved), with `-serve.lock`
    /// added (beside `-wal`, `-shm`).
    public let path: String
    private let descriptor: Int32

    /// Takes the lock for `serve`, waiting while a command upgrades the store (`onWait` is
    /// told once), or throws naming the server that holds it. It says `upgrading` until the
    /// store is open (``SQLiteStore/SchemaUpgrade/whileServing(_:)`` then says `serving`):
    /// a command that came meanwhile must wait for the tables, not take this server for an
    /// older one.
    public init(storePath: String, onWait: (String) -> Void = { _ in }) throws {
        switch try Self.acquire(storePath: storePath, onWait: onWait) {
        case .success(let taken):
            (path, descriptor) = taken
            announce(.upgrading)
        case .failure(let holder):
            throw StoreOpenError(
                path: storePath,
                reason: "another gateway\(holder.pid.map { " (pid \($0))" } ?? "") is serving it; "
                    + "two servers on one store would deliver every record twice. "
                    + "Stop it, or give this one its own storage.sqlite.path")
        }
        #if os(Linux)
            try Self.claimStoreFile(storePath)
        #endif
    }

    /// The server's claim on the store file itself, whatever path reaches it: the lock file
    /// is found by path, so a hard link to the store (a `cp -al` snapshot started for a
    /// test) or a lock file deleted under a running server let a second server start, and
    /// two servers corrupted the store and delivered records twice. A `flock` on the
    /// file's own descriptor is held by its inode. On Linux it does not touch SQLite's
    /// `fcntl` locks (on the BSDs and macOS the two share one list, so there it is not
    /// taken); the descriptor is never closed (closing a descriptor of the file would drop
    /// this process's `fcntl` locks on it, SQLite's among them), so the claim ends with
    /// the process.
    private static func claimStoreFile(_ storePath: String) throws {
        // An empty file is a new database to SQLite, as a missing one is. The owner's
        // alone, as `SQLiteDatabase` creates it; SQLite gives its `-wal` and `-shm` its mode.
        let descriptor = open(storePath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw StoreOpenError(path: storePath, reason: "cannot open it: \(String(cString: strerror(errno)))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            throw StoreOpenError(
                path: storePath,
                reason: "another gateway is serving this file, by another path (a hard link) or after its "
                    + "-serve.lock was removed; two servers on one store would deliver every record twice. "
                    + "Stop it, or give this one its own storage.sqlite.path")
        }
        heldStoreFiles.withLock { $0.append(descriptor) }
    }

    /// Descriptors of claimed store files, open until the process ends (see `claimStoreFile`).
    private static let heldStoreFiles = Mutex<[Int32]>([])

    private init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = descriptor
    }

    /// Whoever holds the lock, as its file says.
    struct Holder: Error {
        let pid: String?
        /// Nil when the file is empty: just taken, not yet written.
        let role: Role?
    }

    /// The lock as `role`, or the server that holds it. While the holder is upgrading (or
    /// has not said yet) this waits for it, telling `onWait` once: upgrades end, and their
    /// process's end frees the lock whatever happens.
    static func take(storePath: String, as role: Role, onWait: (String) -> Void) throws -> Result<ServeLock, Holder> {
        try acquire(storePath: storePath, onWait: onWait).map { taken in
            let lock = ServeLock(path: taken.path, descriptor: taken.descriptor)
            lock.announce(role)
            return lock
        }
    }

    private static func acquire(
        storePath: String, onWait: (String) -> Void
    ) throws -> Result<(path: String, descriptor: Int32), Holder> {
        try StoreOpenError.naming(storePath) {
            // The folder and the store file as `SQLiteDatabase` makes them, the owner's alone:
            // the lock claims both before SQLite opens the file.
            try SQLiteDatabase.createPrivately(URL(fileURLWithPath: storePath).standardizedFileURL)
            let path = Self.lockPath(storePath)
            let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else {
                throw StoreOpenError(
                    path: storePath, reason: "cannot open \(path): \(String(cString: strerror(errno)))")
            }
            var told = false
            var unsaid = 0
            while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
                var holder = Self.holder(path)
                // Silent for two seconds: a holder that could not write (a full disk), taken
                // as a server rather than waited for without end.
                if holder.role == nil {
                    unsaid += 1
                    if unsaid > 20 { holder = Holder(pid: nil, role: .serving) }
                }
                guard holder.role != .serving else {
                    close(descriptor)
                    return .failure(holder)
                }
                if !told, holder.role == .upgrading {
                    onWait("pid \(holder.pid ?? "?") is upgrading the store's tables; waiting for it to finish")
                    told = true
                }
                usleep(100_000)
            }
            return .success((path, descriptor))
        }
    }

    /// Says why the lock is held now (a server upgrading before it serves).
    func announce(_ role: Role) {
        let text = Array("\(getpid())\n\(role.rawValue)\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = text.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
    }

    private static func holder(_ path: String) -> Holder {
        let lines = ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "")
            .split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        guard let pid = lines.first, !pid.isEmpty else { return Holder(pid: nil, role: nil) }
        // A server of a version before roles wrote its pid alone.
        return Holder(pid: pid, role: lines.count > 1 ? Role(rawValue: lines[1]) ?? .serving : .serving)
    }

    deinit {
        // Empty, the file says nothing stale about who holds it next.
        _ = ftruncate(descriptor, 0)
        close(descriptor)
    }

    /// Beside the file SQLite will open, whatever path leads there: a store reached
    /// through a symbolic link (to the file or to its folder) must find the same lock as
    /// one named directly, or two servers would drain one outbox.
    static func lockPath(_ storePath: String) -> String {
        var url = URL(fileURLWithPath: storePath).standardizedFileURL
        // The file's own links, a dangling one too: SQLite creates the file it points to,
        // which a second server would then reach by its own name.
        for _ in 0..<40 {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: url.path) else { break }
            url = URL(fileURLWithPath: target, relativeTo: url.deletingLastPathComponent()).standardizedFileURL
        }
        let folder = url.deletingLastPathComponent().resolvingSymlinksInPath()
        return folder.appendingPathComponent(url.lastPathComponent).path + "-serve.lock"
    }
}
