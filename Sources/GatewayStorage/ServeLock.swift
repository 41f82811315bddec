import Foundation

/// The claim of the one server that delivers from a store: an exclusive `flock` on a file
/// beside the store, held while `serve` runs. Two servers draining one SQLite outbox would
/// each offer every record to every sink; the second refuses to start instead. The kernel
/// drops the lock when the process ends, however it ends (a `SIGKILL` included), so a
/// crash never leaves a stale claim behind.
public final class ServeLock: Sendable {
    /// The lock file's path: the store file's own (links resolved), with `-serve.lock`
    /// added (beside `-wal`, `-shm`).
    public let path: String
    private let descriptor: Int32

    /// Takes the lock, or throws naming the process that holds it.
    public init(storePath: String) throws {
        switch try Self.flockOnce(storePath: storePath) {
        case .success(let taken):
            (path, descriptor) = taken
        case .failure(let held):
            throw StoreOpenError(
                path: storePath,
                reason: "another gateway\(held.pid.map { " (pid \($0))" } ?? "") is serving it; "
                    + "two servers on one store would deliver every record twice. "
                    + "Stop it, or give this one its own storage.sqlite.path")
        }
    }

    private init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = descriptor
    }

    /// The lock held by someone else: the pid a server wrote, when it could be read.
    struct Held: Error {
        let pid: String?
    }

    /// The lock if no server holds it, without waiting: for a command that must know no
    /// server is using the store while it upgrades the store's tables.
    static func ifFree(storePath: String) throws -> Result<ServeLock, Held> {
        try flockOnce(storePath: storePath).map { ServeLock(path: $0.path, descriptor: $0.descriptor) }
    }

    private static func flockOnce(storePath: String) throws -> Result<(path: String, descriptor: Int32), Held> {
        try StoreOpenError.naming(storePath) {
            let folder = URL(fileURLWithPath: storePath).standardizedFileURL.deletingLastPathComponent()
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let path = Self.lockPath(storePath)
            let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            guard descriptor >= 0 else {
                throw StoreOpenError(path: storePath, reason: "cannot create \(path): \(String(cString: strerror(errno)))")
            }
            guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
                let holder = (try? String(contentsOfFile: path, encoding: .utf8))?
                    .trimmingCharacters(in: .whitespacesAndNewlines)
                close(descriptor)
                return .failure(Held(pid: holder?.isEmpty == false ? holder : nil))
            }
            // Only for the message a second server shows; the lock, not this, is the claim.
            let pid = Array("\(getpid())\n".utf8)
            _ = ftruncate(descriptor, 0)
            _ = pid.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
            return .success((path, descriptor))
        }
    }

    deinit { close(descriptor) }

    /// Beside the file SQLite will open, whatever path leads there: a store reached
    /// through a symbolic link (to the file or to its folder) must find the same lock as
    /// one named directly, or two servers would drain one outbox.
    static func lockPath(_ storePath: String) -> String {
        let url = URL(fileURLWithPath: storePath).standardizedFileURL
        let file = FileManager.default.fileExists(atPath: url.path)
            ? url.resolvingSymlinksInPath()
            : url.deletingLastPathComponent().resolvingSymlinksInPath().appendingPathComponent(url.lastPathComponent)
        return file.path + "-serve.lock"
    }
}
