import Foundation
import GRDB
import GatewayCore

/// A consistent copy of a store, taken while a gateway may be writing it.
///
/// Copying the file itself is not a backup: committed pages may still be in `PATH-wal`
/// only, and a copy taken mid-checkpoint mixes two moments. SQLite's online backup, run
/// inside one read transaction, copies one committed moment and does not hold the
/// writer (WAL), so ingest goes on meanwhile.
///
/// The copy is written to `TARGET.partial-XXXXXXXX` (this run's own, mode 0600), switched
/// to a rollback journal (so it is one self-contained file), checked with `quick_check`,
/// synced and only then linked to `TARGET`, which is never replaced: the target is either
/// absent or a whole store.
public enum StoreBackup {
    /// What a finished backup holds.
    public struct Summary: Sendable {
        /// Records in the copy: every one acknowledged before the backup began, and
        /// perhaps some after.
        public let records: Int
        public let bytes: Int
        /// Where the copy is, its folder resolved.
        public var path = ""
    }

    /// Why a backup was not taken; the target is left as it was.
    public struct Refusal: Error, CustomStringConvertible {
        public let description: String
    }

    /// Copies `store` to `target`, calling `progress(copiedPages, totalPages)` after each
    /// step of `pagesPerStep` pages (256 of 4 KB by default). Every step runs in the same
    /// read transaction, so what a writer commits meanwhile neither restarts nor enters it.
    public static func copy(
        _ store: SQLiteStore, to target: String, pagesPerStep: Int32 = 256, progress: (Int, Int) -> Void = { _, _ in }
    ) throws -> Summary {
        let destination = try resolve(target, store: store)
        // This run's own name, made 0600 and exclusively: another backup to the same file
        // writes its own, and the copy (tokens, user ids, raw payloads) is the owner's only.
        let partial = destination + ".partial-" + UUID().uuidString.prefix(8)
        let created = open(partial, O_CREAT | O_EXCL | O_WRONLY, 0o600)
        guard created >= 0 else { throw Refusal(description: "cannot create \(partial): \(errorText(errno))") }
        close(created)
        do {
            let summary = try write(store, to: partial, pagesPerStep: pagesPerStep, progress: progress)
            try sync(path: partial)
            // link() never replaces: a backup that finished first under this name keeps it.
            guard link(partial, destination) == 0 else {
                let code = errno
                throw Refusal(
                    description: code == EEXIST
                        ? "\(destination) appeared while the copy was made; it was left as it is"
                        : "cannot name the copy \(destination): \(errorText(code))")
            }
            unlink(partial)
            // The copy is whole and named; a folder that cannot be synced only puts its
            // name at risk in a power cut, which is no reason to call the backup not taken.
            try? sync(path: (destination as NSString).deletingLastPathComponent)
            return Summary(records: summary.records, bytes: summary.bytes, path: destination)
        } catch {
            removeFiles(of: partial)
            if error is Refusal { throw error }
            // SQLite's error does not say which side failed (a full disk under the target,
            // a damaged page in the store), so the message names both.
            throw Refusal(description: "copying \(store.path) to \(destination) failed: \(describe(error))")
        }
    }

    /// The file `target` names, its folder resolved as the kernel does (links, `..`), so
    /// that the copy lands where the summary says; refused when it would replace anything.
    static func resolve(_ target: String, store: SQLiteStore) throws -> String {
        guard !target.hasSuffix("/"), !target.isEmpty else {
            throw Refusal(description: "\(target) names a folder; give the backup's file name")
        }
        let given = URL(fileURLWithPath: target)
        let folderPath = given.deletingLastPathComponent().path
        guard FileManager.default.isFolder(atPath: folderPath), let folder = realPath(folderPath)
        else {
            throw Refusal(description: "\(folderPath) is not a folder")
        }
        let destination = (folder == "/" ? "" : folder) + "/" + given.lastPathComponent
        // lstat: a link, even one pointing nowhere, is a file the backup would replace.
        var status = stat()
        guard lstat(destination, &status) != 0 else {
            throw Refusal(description: "\(target) exists; a backup never replaces a file")
        }
        // A side file left beside the name (an earlier store's `-journal` or `-wal`) would
        // be taken as the copy's own when it is first opened: a hot journal rolls its
        // pages back over the backup's, a stale WAL replays another store's.
        for suffix in ["-journal", "-wal"] where lstat(destination + suffix, &status) == 0 {
            throw Refusal(
                description: "\(target)\(suffix) exists: SQLite would apply it to the backup; move it away first")
        }
        // The store's own side files need not exist to be its: a `-journal` made here
        // would lock the live store, and the next start would delete it as a hot journal.
        let storeFile = realPath(store.path) ?? store.path
        for suffix in ["-journal", "-wal", "-shm", "-serve.lock"] where destination == storeFile + suffix {
            throw Refusal(description: "\(target) is the store's own \(suffix) file; choose another name")
        }
        return destination
    }

    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private static func errorText(_ code: Int32) -> String {
        String(cString: strerror(code))
    }

    /// SQLite's code with its meaning: after a failed backup step the connection's
    /// message is often only "not an error".
    private static func describe(_ error: any Error) -> String {
        guard let error = error as? DatabaseError else { return "\(error)" }
        let message = error.message.flatMap { $0 == "not an error" ? nil : $0 }
        return "SQLite error \(error.resultCode)" + (message.map { ": \($0)" } ?? "")
    }

    private static func write(
        _ store: SQLiteStore, to path: String, pagesPerStep: Int32, progress: (Int, Int) -> Void
    ) throws -> Summary {
        let takenAt = Date()
        let copy = try DatabaseQueue(path: path)
        // GRDB calls it only during the backup.
        try withoutActuallyEscaping(progress) { progress in
            try store.pool.backup(to: copy, pagesPerStep: pagesPerStep) { step in
                progress(step.totalPageCount - step.remainingPageCount, step.totalPageCount)
            }
        }
        return try copy.writeWithoutTransaction { db in
            // The store's pages say WAL; a copy that needs no log beside it is what an
            // operator expects to move around.
            try db.execute(sql: "PRAGMA journal_mode = DELETE")
            try RestoredBackup.mark(db, takenAt: takenAt)
            let check = try String.fetchAll(db, sql: "PRAGMA quick_check")
            guard check == ["ok"] else {
                throw Refusal(
                    description: "the copy failed SQLite's quick_check: \(check.prefix(3).joined(separator: "; "))")
            }
            // A forget request in its sinks' outboxes is a row of `records` too, not a record.
            let records =
                try Int.fetchOne(db, sql: "SELECT count(*) FROM records WHERE provider <> 'forget'") ?? 0
            let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 0
            return Summary(records: records, bytes: pages * pageSize)
        }
    }

    /// The database file at `path` and the files SQLite may have left beside it; files
    /// only (unlink), never a folder.
    private static func removeFiles(of path: String) {
        for suffix in ["", "-journal", "-wal", "-shm"] { unlink(path + suffix) }
    }

    private static func sync(path: String) throws {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { throw Refusal(description: "cannot open \(path) to sync it") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw Refusal(description: "cannot sync \(path): errno \(errno)") }
    }
}
