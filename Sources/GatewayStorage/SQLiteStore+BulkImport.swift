import GRDB

extension SQLiteStore {
    /// The writer's page cache during a bulk import, in KiB: room for every page one of its
    /// commits dirties. Into a large store each record lands on a page of its own in each
    /// index keyed in random order (the dedupe key, a sink's index on a user id), so a
    /// commit dirties a few thousand pages; within SQLite's 2 MB default the writer spilled
    /// them to the log before the commit and read them back. Twice this held no more of
    /// them and took the import past its memory bound. `serve`'s commits are small enough
    /// for the default, and its memory stays as it was.
    static let bulkImportCacheKiB = 32_768

    /// How much log the writer lets grow before it checkpoints during a bulk import, in
    /// pages (about 64 MB).
    static let bulkImportCheckpointPages = 16_384

    /// For `import`, which runs no ``WALCheckpointer``: the writer's cache holds a commit's
    /// pages, and it checkpoints once the log passes ``bulkImportCheckpointPages`` rather
    /// than SQLite's 1,000. Into a large store every commit of an import crosses 1,000
    /// pages, so each one was followed by a checkpoint and a sync of the file, copying again
    /// the pages that the next commit dirties anew (the tables' last pages, the busy ranges
    /// of their indexes).
    public func prepareWriterForImport() async throws {
        try await pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA cache_size = -\(Self.bulkImportCacheKiB)")
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(Self.bulkImportCheckpointPages)")
        }
    }

    /// After the import's last commit: the log into the database file and cut to nothing,
    /// so that a copy of the file alone holds what was imported and no log of the import's
    /// 64 MB stays beside it, and SQLite's settings back. While a server's readers still use
    /// the log it is left to the server's checkpointer, after the busy wait.
    public func checkpointAfterImport() async throws {
        try await pool.writeWithoutTransaction { db in
            _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            try db.execute(sql: "PRAGMA cache_size = -2000")
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(WALCheckpointer.defaultPages)")
        }
    }
}
