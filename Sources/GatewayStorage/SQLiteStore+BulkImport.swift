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
    /// pages: a quarter of the store, from 64 MB to 1 GB. A checkpoint copies each page the
    /// log holds into the file once, however many commits wrote it: a log several times the
    /// size of the dedupe key's index (about a fifteenth of the store) gathers many records
    /// on each of its pages before the copy, where a log smaller than the index copies and
    /// syncs a page for nearly every record. The log's file keeps its largest size until the
    /// import ends: the disk needs that quarter free beside the store.
    static func bulkImportCheckpointPages(storePages: Int) -> Int {
        min(max(storePages / 4, 16_384), 262_144)
    }

    /// For `import`, which runs no ``WALCheckpointer``: the writer's cache holds a commit's
    /// pages, and it checkpoints once the log passes ``bulkImportCheckpointPages(storePages:)``
    /// rather than SQLite's 1,000. Into a large store every commit of an import crosses 1,000
    /// pages, so each one was followed by a checkpoint and a sync of the file, copying again
    /// the pages that the next commit dirties anew (the tables' last pages, the busy ranges
    /// of their indexes).
    public func prepareWriterForImport() async throws {
        try await pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA cache_size = -\(Self.bulkImportCacheKiB)")
            try Self.fitImportCheckpoint(db)
        }
    }

    /// After each of the import's commits: the store grows as it imports, and the log with it.
    public func fitImportCheckpointToStore() async throws {
        try await pool.writeWithoutTransaction { db in try Self.fitImportCheckpoint(db) }
    }

    private static func fitImportCheckpoint(_ db: Database) throws {
        let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
        try db.execute(sql: "PRAGMA wal_autocheckpoint = \(bulkImportCheckpointPages(storePages: pages))")
    }

    /// After the import's last commit: the log into the database file and cut to nothing,
    /// so that a copy of the file alone holds what was imported and no log of the import's
    /// size stays beside it, and SQLite's settings back. While a server's readers still use
    /// the log it is left to the server's checkpointer, after the busy wait.
    public func checkpointAfterImport() async throws {
        try await pool.writeWithoutTransaction { db in
            _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            try db.execute(sql: "PRAGMA cache_size = -2000")
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(WALCheckpointer.defaultPages)")
        }
    }
}
