import Foundation
import GRDB

/// A consistent copy of a store, taken while a gateway may be writing it.
///
/// Copying the file itself is not a backup: committed pages may still be in `PATH-wal`
/// only, and a copy taken mid-checkpoint mixes two moments. SQLite's online backup, run
/// inside one read transaction, copies one committed moment and does not hold the
/// writer (WAL), so ingest goes on meanwhile.
///
/// The copy is written to `TARGET.partial`, switched to a rollback journal (so it is one
/// self-contained file), checked with `quick_check`, synced and only then renamed to
/// `TARGET`: the target is either absent or a whole store.
public enum StoreBackup {
    /// What a finished backup holds.
    public struct Summary: Sendable {
        /// Records in the copy: every one acknowledged before the backup began, and
        /// perhaps some after.
        public let records: Int
        public let bytes: Int
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
        let targetURL = URL(fileURLWithPath: target).standardizedFileURL
        guard !FileManager.default.fileExists(atPath: targetURL.path) else {
            // Never over an older backup, nor over the store or its log.
            throw Refusal(description: "\(target) exists; a backup never replaces a file")
        }
        let folder = targetURL.deletingLastPathComponent()
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder.path, isDirectory: &isFolder), isFolder.boolValue else {
            throw Refusal(description: "\(folder.path) is not a folder")
        }
        let partial = targetURL.path + ".partial"
        // A partial copy is a previous backup's that did not finish; it is only ours to remove.
        removeFiles(of: partial)
        do {
            let summary = try write(store, to: partial, pagesPerStep: pagesPerStep, progress: progress)
            try sync(path: partial)
            try FileManager.default.moveItem(atPath: partial, toPath: targetURL.path)
            try sync(path: folder.path)
            return summary
        } catch {
            removeFiles(of: partial)
            if error is Refusal { throw error }
            // SQLite's error does not say which side failed (a full disk under the target,
            // a damaged page in the store), so the message names both.
            throw Refusal(description: "copying \(store.path) to \(target) failed: \(error)")
        }
    }

    private static func write(
        _ store: SQLiteStore, to path: String, pagesPerStep: Int32, progress: (Int, Int) -> Void
    ) throws -> Summary {
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
            let check = try String.fetchAll(db, sql: "PRAGMA quick_check")
            guard check == ["ok"] else {
                throw Refusal(description: "the copy failed SQLite's quick_check: \(check.prefix(3).joined(separator: "; "))")
            }
            let records = try Int.fetchOne(db, sql: "SELECT count(*) FROM records") ?? 0
            let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 0
            return Summary(records: records, bytes: pages * pageSize)
        }
    }

    /// The database file at `path` and the files SQLite may have left beside it.
    private static func removeFiles(of path: String) {
        for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    private static func sync(path: String) throws {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { throw Refusal(description: "cannot open \(path) to sync it") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw Refusal(description: "cannot sync \(path): errno \(errno)") }
    }
}
