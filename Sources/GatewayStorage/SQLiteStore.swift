import Foundation
import GatewayCompactRaw
import GatewayCore
import GRDB

/// The embedded store: records, dedupe keys, outboxes and dead letters in one SQLite file
/// (WAL). Every acknowledged write is a committed transaction.
public final class SQLiteStore: AttributionStore {
    public let pool: DatabasePool
    public let path: String
    /// Applied to the file's shared writer when the store opens, whoever opened it first.
    public let durability: SQLiteDatabase.Durability
    let groupCommit: GroupCommit
    /// Whether ingest commits are going through (see ``CommitHealth``).
    public var commitHealth: CommitHealth { groupCommit.health }
    let inlineSinks = InlineSinks()
    /// When sinks' rows are queued (see ``insert(_:prepared:inline:queuedAt:_:)``).
    let now: @Sendable () -> Date

    /// When opening a store may upgrade its tables to this binary's.
    public enum SchemaUpgrade: Sendable {
        /// `serve`, which holds the store's lock (and says it is upgrading meanwhile).
        case whileServing(ServeLock)
        /// Only when no server holds the store: a newer binary's command (`report`,
        /// `import`) must not change the tables under an older server still running. It
        /// waits for another command, or a server, that is upgrading them right now.
        case unlessServed
        /// Never, and a newer binary's tables are read as they are (`backup`, a copy of
        /// whatever the file holds).
        case never
    }

    /// Opens the store, upgrading its tables as `upgrade` allows (`onWait` is told when it
    /// waits for another process's upgrade, or makes one itself). A store that a newer binary upgraded is
    /// refused unless `upgrade` is `.never`: this one would run on tables whose meaning it
    /// does not know.
    public init(
        path: String, durability: SQLiteDatabase.Durability = .full, upgrade: SchemaUpgrade = .unlessServed,
        onWait: (String) -> Void = { _ in }, now: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        self.path = path
        self.durability = durability
        self.now = now
        pool = try StoreOpenError.naming(path) {
            let pool = try SQLiteDatabase.pool(path: path, durability: durability)
            try Self.bringUpToDate(pool, path: path, upgrade: upgrade, onWait: onWait)
            return pool
        }
        groupCommit = GroupCommit(pool: pool)
    }

    private static func bringUpToDate(
        _ pool: DatabasePool, path: String, upgrade: SchemaUpgrade, onWait: (String) -> Void
    ) throws {
        switch upgrade {
        case .never:
            return
        case .whileServing(let lock):
            // The lock says `upgrading` from the moment it is taken until the tables are ready.
            defer { lock.announce(.serving) }
            try migrateIfBehind(pool, path: path, onWait: onWait)
        case .unlessServed:
            guard case .behind = try standing(pool, path: path) else { return }
            switch try ServeLock.take(storePath: path, as: .upgrading, onWait: onWait) {
            case .success(let lock):
                // Held until the tables are upgraded, so that no server starts on them
                // meanwhile; another process may have upgraded them while this waited.
                try withExtendedLifetime(lock) { try migrateIfBehind(pool, path: path, onWait: onWait) }
            case .failure(let server):
                // A server holds it, perhaps one that has just upgraded the tables itself.
                guard case .behind(let missing) = try standing(pool, path: path) else { return }
                throw StoreOpenError(
                    path: path,
                    reason: "it needs this version's upgrade (\(missing.joined(separator: ", "))), and a "
                        + "gateway\(server.pid.map { " (pid \($0))" } ?? "") of an older version is serving it; "
                        + "upgrading under it could change what it reads. Restart that gateway with this "
                        + "version first, or use the version it runs")
            }
        }
    }

    /// Upgrades the tables, saying so first for a store that has any (a data upgrade reads
    /// every row it changes: on a large store that takes minutes, and in silence it would
    /// look hung to whoever watched it start).
    private static func migrateIfBehind(_ pool: DatabasePool, path: String, onWait: (String) -> Void) throws {
        guard case .behind(let missing) = try standing(pool, path: path) else { return }
        if missing.count < SQLiteStoreSchema.migrator.migrations.count {
            onWait(
                "upgrading the store's tables (\(missing.joined(separator: ", "))); on a large store this may take "
                    + "minutes, and an interrupted upgrade starts again at the next start")
        }
        try SQLiteStoreSchema.migrator.migrate(pool)
    }

    /// How the tables stand; a newer binary's are refused.
    private static func standing(_ pool: DatabasePool, path: String) throws -> SQLiteStoreSchema.Standing {
        let standing = try pool.read(SQLiteStoreSchema.standing)
        if case .ahead(let unknown) = standing {
            throw StoreOpenError(
                path: path,
                reason: "a newer attribution-gateway upgraded it (\(unknown.joined(separator: ", ")), "
                    + "which this version does not know); run that version or a later one. "
                    + "A backup taken before the upgrade is the way back to this version")
        }
        return standing
    }

    /// Concurrent calls share commits (see ``GroupCommit``); each returns once its own
    /// records are committed.
    public func ingest(_ batch: [RoutedRecord]) async throws -> [IngestResult] {
        let (results, outcome) = try await Self.outboxIfInlineFails(inlineSinks.writes) { inline in
            let prepared = self.prepare(batch, inline: inline)
            return try await self.groupCommit.submit { db in
                try Self.insert(batch, prepared: prepared, inline: inline, queuedAt: self.now(), db)
            }
        }
        inlineSinks.report(outcome)
        return results
    }

    /// Runs `write` with the inline sinks' rows, and if one undid the whole transaction (a
    /// trigger, a full disk on its wide row), once more with outbox rows in their place:
    /// that sink must be delayed, not the records refused. Any other failure is the answer
    /// as it stands, without a second write.
    static func outboxIfInlineFails<T>(
        _ inline: InlineWrites, _ write: (InlineWrites) async throws -> T
    ) async throws -> T {
        do {
            return try await write(inline)
        } catch is InlineRowUndidTransaction {
            return try await write(inline.toOutboxes)
        }
    }

    /// Thrown when an inline sink's row failed and SQLite rolled the transaction back.
    struct InlineRowUndidTransaction: Error {
        let sink: String
        let underlying: any Error
    }

    /// Inserts records, then for each routed sink either its row (an inline sink, see
    /// ``InlineDelivery``) or an outbox row, inside the caller's transaction. Returns the
    /// results and what happened to inline sinks.
    static func insert(
        _ batch: [RoutedRecord], prepared: [PreparedRecord], inline: InlineWrites, queuedAt: Date, _ db: Database
    ) throws -> ([IngestResult], InlineOutcome) {
        var results: [IngestResult] = []
        var outcome = InlineOutcome()
        // The sinks' rows count from their commit, not from the record's received_at, which
        // may be long past (an import of history): an outbox row's age must say how long its
        // sink has had it.
        let now = queuedAt.timeIntervalSince1970
        for (item, prepared) in zip(batch, prepared) {
            let body = prepared.body
            let record = item.record
            try db.executeCached(
                """
                INSERT INTO records (record_id, dedupe_key, provider, app_id, received_at, body, raw, quarantined_bytes)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(dedupe_key) DO NOTHING
                """,
                [
                    record.recordID, record.dedupeKey, record.provider, record.appID,
                    record.receivedAt.timeIntervalSince1970, body, prepared.raw.map { Data($0) },
                    record.isQuarantined ? prepared.size : nil,
                ])
            if db.changesCount == 0 {
                let original = try String.fetchOne(
                    db.cachedStatement(sql: "SELECT record_id FROM records WHERE dedupe_key = ?"),
                    arguments: [record.dedupeKey])
                results.append(.duplicate(of: original ?? record.recordID))
                continue
            }
            for sink in item.sinks {
                if let delivery = inline.deliveries[sink] {
                    if inline.writesRows, let arguments = prepared.inline[sink] {
                        do {
                            try db.executeCached(delivery.sql, arguments)
                            outcome.delivered.append((sink, record, queuedAt))
                            continue
                        } catch {
                            // A full disk or an I/O error can make SQLite roll the whole
                            // transaction back; later statements would then commit one by
                            // one. Fail this write instead; it is tried again with outbox
                            // rows only.
                            guard db.isInsideTransaction else {
                                throw InlineRowUndidTransaction(sink: sink, underlying: error)
                            }
                            // Only this statement was undone (SQLite's statement atomicity).
                        }
                    }
                    // Not written with its record (its row failed, its arguments could not
                    // be made, or this is the retry with outbox rows only): the outbox row
                    // below hands the record to the sink's worker, which must be told.
                    outcome.queued[sink, default: 0] += 1
                }
                try db.executeCached(
                    """
                    INSERT INTO outbox (sink, record_id, attempts, next_attempt_at, created_at, lane)
                    VALUES (?, ?, 0, ?, ?, ?)
                    """,
                    [sink, record.recordID, now, now, record.deliveryLane])
            }
            results.append(.stored(recordID: record.recordID))
        }
        return (results, outcome)
    }

    public func existingRecordIDs(dedupeKeys: [String]) async throws -> [DedupeKey.Bytes: String] {
        guard !dedupeKeys.isEmpty else { return [:] }
        return try await pool.read { db in
            var found: [DedupeKey.Bytes: String] = [:]
            let rows = try Row.fetchAll(
                db,
                sql: "SELECT dedupe_key, record_id FROM records WHERE dedupe_key IN (SELECT value FROM json_each(?))",
                arguments: [Self.jsonArray(dedupeKeys)])
            for row in rows {
                found[DedupeKey.Bytes(row["dedupe_key"])] = row["record_id"]
            }
            return found
        }
    }

    /// Rows with a lane that an older row of the same lane holds back. Older means queued
    /// first for this sink: `position` (a late version of a record keeps its first row's),
    /// else the row's id. Not `created_at`: with the wall clock stepped back, a device's
    /// later event would go before its earlier one.
    static let behindItsLane = """
        (o.lane IS NOT NULL AND EXISTS (SELECT 1 FROM outbox p WHERE p.sink = o.sink AND p.lane = o.lane
            AND COALESCE(p.position, p.id) < COALESCE(o.position, o.id)))
        """

    /// ``AttributionRecord/deliveryLane`` in SQL, from a stored body `r.body` (NULL for a
    /// body that is not JSON, which is then dead-lettered when due rather than failing
    /// the whole statement).
    static let laneOfBody = """
        CASE WHEN json_valid(r.body) THEN r.app_id || '|' || COALESCE(json_extract(r.body, '$.idfv'), 'user:' || json_extract(r.body, '$.app_user_id'), json_extract(r.body, '$.idfa')) END
        """

    /// A stored body that cannot be read (written by a version that no longer reads it)
    /// comes back marked ``OutboxEntry/unreadable`` for the worker to dead-letter, rather
    /// than failing every batch it would be in: one bad row must not stop a sink.
    public func dueEntries(sink: String, now: Date, limit: Int, laneOrdered: Bool) async throws -> [OutboxEntry] {
        try await pool.read { db in
            var entries: [OutboxEntry] = []
            for row in try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT o.id, o.attempts, o.created_at, o.sending_since, \(StoredColumns.selectList(of: "r"))
                        FROM outbox o JOIN records r ON r.record_id = o.record_id
                        WHERE o.sink = ? AND o.next_attempt_at <= ? \(laneOrdered ? "AND NOT \(Self.behindItsLane)" : "")
                        ORDER BY o.next_attempt_at, o.id LIMIT ?
                        """),
                arguments: [sink, now.timeIntervalSince1970, limit])
            {
                do {
                    var entry = OutboxEntry(
                        id: row["id"], record: try Self.record(of: row),
                        attempts: row["attempts"], queuedAt: Date(timeIntervalSince1970: row["created_at"]))
                    entry.wasBeingSent = (row["sending_since"] as Double?) != nil
                    entries.append(entry)
                } catch {
                    entries.append(
                        .unreadable(
                            id: row["id"], attempts: row["attempts"],
                            reason: "the stored record cannot be read: \(error)"))
                }
            }
            return entries
        }
    }

    public func holdLanes(sink: String, behind heads: [(id: Int64, until: Date)]) async throws {
        guard !heads.isEmpty else { return }
        try await pool.write { db in
            for head in heads {
                try db.executeCached(
                    """
                    UPDATE outbox SET next_attempt_at = MAX(next_attempt_at, ?)
                    WHERE sink = ? AND id != ? AND lane = (SELECT lane FROM outbox WHERE id = ?)
                    """,
                    [head.until.timeIntervalSince1970, sink, head.id, head.id])
            }
        }
    }

    public func nextDueDate(sink: String, laneOrdered: Bool) async throws -> Date? {
        try await pool.read { db in
            try Double.fetchOne(
                db,
                sql: """
                    SELECT MIN(o.next_attempt_at) FROM outbox o
                    WHERE o.sink = ? \(laneOrdered ? "AND NOT \(Self.behindItsLane)" : "")
                    """,
                arguments: [sink]
            ).map { Date(timeIntervalSince1970: $0) }
        }
    }

    public func resolve(sink: String, _ resolutions: [OutboxResolution], now: Date) async throws {
        guard !resolutions.isEmpty else { return }
        let failedAt = now.timeIntervalSince1970
        try await pool.write { db in
            for resolution in resolutions {
                switch resolution {
                case .delivered(let id):
                    try db.executeCached("DELETE FROM outbox WHERE id = ?", [id])
                case .retry(let id, let attempts, let at, let error):
                    try db.executeCached(
                        """
                        UPDATE outbox SET attempts = ?, next_attempt_at = ?, last_error = ?, sending_since = NULL
                        WHERE id = ?
                        """,
                        [attempts, at.timeIntervalSince1970, error, id])
                case .deadLetter(let id, let attempts, let error):
                    try db.executeCached(
                        """
                        INSERT OR REPLACE INTO dead_letters (sink, record_id, attempts, error, failed_at)
                        SELECT sink, record_id, ?, ?, ? FROM outbox WHERE id = ?
                        """,
                        [attempts, error, failedAt, id])
                    try db.executeCached("DELETE FROM outbox WHERE id = ?", [id])
                }
            }
        }
    }

    /// One process serves the file (``ServeLock``): its rows are never leased, and a batch
    /// cut short is due as it was.
    public func unclaim(sink: String, _ entries: [OutboxEntry]) async throws {}

    public func markSending(id: Int64, now: Date) async throws {
        try await pool.write { db in
            try db.executeCached("UPDATE outbox SET sending_since = ? WHERE id = ?", [now.timeIntervalSince1970, id])
        }
    }

    public func outboxStats() async throws -> [String: OutboxStats] {
        try await pool.read { db in
            var stats: [String: OutboxStats] = [:]
            for row in try Row.fetchAll(
                db, sql: "SELECT sink, COUNT(*) AS depth, MIN(created_at) AS oldest FROM outbox GROUP BY sink")
            {
                let oldest: Double? = row["oldest"]
                stats[row["sink"]] = OutboxStats(
                    depth: row["depth"], oldest: oldest.map { Date(timeIntervalSince1970: $0) })
            }
            return stats
        }
    }

    /// Newest first; `ids` are selected before the limit, so an old one is found.
    public func deadLetters(sink: String?, ids: [Int64]?, limit: Int) async throws -> [DeadLetter] {
        let idList = ids.map { Self.jsonArray($0.map(String.init)) }
        return try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT id, sink, record_id, attempts, error, failed_at FROM dead_letters
                    WHERE (?1 IS NULL OR sink = ?1) AND (?3 IS NULL OR id IN (SELECT CAST(value AS INTEGER) FROM json_each(?3)))
                    ORDER BY id DESC LIMIT ?2
                    """,
                arguments: [sink, limit, idList]
            ).map { row in
                DeadLetter(
                    id: row["id"], sink: row["sink"], recordID: row["record_id"], attempts: row["attempts"],
                    error: row["error"], failedAt: Date(timeIntervalSince1970: row["failed_at"]))
            }
        }
    }

    /// How many dead letters each sink has (of `ids` alone, when given).
    public func deadLetterCounts(ids: [Int64]?) async throws -> [String: Int] {
        let idList = ids.map { Self.jsonArray($0.map(String.init)) }
        return try await pool.read { db in
            var counts: [String: Int] = [:]
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT sink, COUNT(*) AS n FROM dead_letters
                    WHERE ?1 IS NULL OR id IN (SELECT CAST(value AS INTEGER) FROM json_each(?1)) GROUP BY sink
                    """,
                arguments: [idList])
            {
                counts[row["sink"]] = row["n"]
            }
            return counts
        }
    }

    /// Dead letters back to their outboxes; with `among`, only those of these sinks (the
    /// ones a server would drain: an outbox of a sink no longer configured has no worker).
    public func retryDeadLetters(ids: [Int64]?, sink: String?, among sinks: [String]?, now: Date) async throws -> Int {
        let idList = ids.map { Self.jsonArray($0.map(String.init)) }
        let sinkList = sinks.map(Self.jsonArray)
        return try await pool.write { db in
            let filter = """
                (?1 IS NULL OR id IN (SELECT CAST(value AS INTEGER) FROM json_each(?1))) AND (?2 IS NULL OR sink = ?2)
                AND (?4 IS NULL OR sink IN (SELECT value FROM json_each(?4)))
                """
            try db.executeCached(
                """
                INSERT OR IGNORE INTO outbox (sink, record_id, attempts, next_attempt_at, created_at, lane)
                SELECT d.sink, d.record_id, 0, ?3, ?3, \(Self.laneOfBody)
                FROM dead_letters d JOIN records r ON r.record_id = d.record_id WHERE \(filter)
                """,
                [idList, sink, now.timeIntervalSince1970, sinkList])
            try db.executeCached("DELETE FROM dead_letters WHERE \(filter)", [idList, sink, nil, sinkList])
            return db.changesCount
        }
    }

    public func dropDeadLetters(ids: [Int64]?, sink: String?) async throws -> Int {
        let idList = ids.map { Self.jsonArray($0.map(String.init)) }
        return try await pool.write { db in
            try db.executeCached(
                """
                DELETE FROM dead_letters WHERE (?1 IS NULL OR id IN (SELECT CAST(value AS INTEGER) FROM json_each(?1)))
                AND (?2 IS NULL OR sink = ?2)
                """,
                [idList, sink])
            return db.changesCount
        }
    }

    static let replayCondition = "(?1 IS NULL OR received_at >= ?1) AND (?2 IS NULL OR provider = ?2)"

    /// Stored records in storage order, a page at a time, each with its id, and `nil` for a
    /// body that cannot be read (which a caller may still queue: the worker dead-letters it).
    public func readableRecords(matching filter: ReplayFilter, after cursor: Int64, limit: Int) async throws
        -> (records: [(recordID: String, record: AttributionRecord?)], cursor: Int64)
    {
        try await page(
            of: StoredColumns.selectList(), matching: filter, after: cursor, limit: limit
        ) { row in
            (recordID: row["record_id"], record: try? Self.record(of: row))
        }
    }

    struct UnreadableBody: Error, CustomStringConvertible {
        let description: String
    }

    /// A row's `body` as bytes. Read as GRDB's `String`, a body that is not text (NULL, a
    /// blob of bytes that are not UTF-8: a damaged or hand-edited store) stopped the
    /// process, and again at every start as the worker came back to it.
    static func body(of row: Row) throws -> Data {
        let value: DatabaseValue = row["body"]
        switch value.storage {
        case .string(let text): return Data(text.utf8)
        case .blob(let bytes): return bytes
        case .null: throw UnreadableBody(description: "the stored body is NULL")
        case .int64, .double: throw UnreadableBody(description: "the stored body is a number")
        }
    }

    /// The record a row's columns of ``StoredColumns/selectList(of:)`` hold; without
    /// `withRaw`, without its raw payload kept apart.
    static func record(of row: Row, withRaw: Bool = true) throws -> AttributionRecord {
        let raw: Data? = withRaw ? row["raw"] : nil
        let columns = StoredColumns(
            recordID: row["record_id"], dedupeKey: row["dedupe_key"], provider: row["provider"], appID: row["app_id"])
        return try AttributionRecord(body: try body(of: row), keptApart: columns, compactRaw: raw.map { [UInt8]($0) })
    }

    /// One page of `column` from the records matching `filter`, in storage order after
    /// `cursor`, with the cursor to continue from.
    private func page<T: Sendable>(
        of column: String, matching filter: ReplayFilter, after cursor: Int64, limit: Int,
        _ read: @escaping @Sendable (Row) throws -> T
    ) async throws -> ([T], cursor: Int64) {
        try await pool.read { db in
            let rows = try Row.fetchAll(
                db,
                sql:
                    "SELECT seq, \(column) FROM records WHERE \(Self.replayCondition) AND seq > ?3 ORDER BY seq LIMIT ?4",
                arguments: [filter.since?.timeIntervalSince1970, filter.provider, cursor, limit])
            return (try rows.map(read), rows.last?["seq"] ?? cursor)
        }
    }

    public func countRecords(matching filter: ReplayFilter) async throws -> Int {
        try await pool.read { db in
            try Int.fetchOne(
                db, sql: "SELECT COUNT(*) FROM records WHERE \(Self.replayCondition)",
                arguments: [filter.since?.timeIntervalSince1970, filter.provider]) ?? 0
        }
    }

    public func enqueue(recordIDs: [String], sink: String, now: Date) async throws -> Int {
        guard !recordIDs.isEmpty else { return 0 }
        return try await pool.write { db in
            try db.executeCached(
                """
                INSERT OR IGNORE INTO outbox (sink, record_id, attempts, next_attempt_at, created_at, lane)
                SELECT ?, j.value, 0, ?, ?, \(Self.laneOfBody) FROM json_each(?) j JOIN records r ON r.record_id = j.value
                """,
                [sink, now.timeIntervalSince1970, now.timeIntervalSince1970, Self.jsonArray(recordIDs)])
            let queued = db.changesCount
            // A dead letter of a record queued again is being retried, as `dlq retry` does:
            // left, a later `dlq retry --all` would send the record once more.
            try db.executeCached(
                """
                DELETE FROM dead_letters WHERE sink = ? AND record_id IN (SELECT value FROM json_each(?))
                AND EXISTS (SELECT 1 FROM outbox o WHERE o.sink = dead_letters.sink AND o.record_id = dead_letters.record_id)
                """,
                [sink, Self.jsonArray(recordIDs)])
            return queued
        }
    }

    public func ping() async throws {
        _ = try await pool.read { db in try Int.fetchOne(db, sql: "SELECT 1") }
    }

    /// A few hundred records per transaction, so that a cap lowered far below what is kept
    /// does not hold the writer, and every ingest behind it, for one long delete.
    public func trimQuarantined(provider: String, maxBytes: Int) async throws -> QuarantineTrim {
        var trim = QuarantineTrim(dropped: 0, keptBytes: 0)
        var after: Int64 = 0
        while true {
            let (dropped, kept, last) = try await pool.write { [after] db -> (Int, Int, Int64?) in
                var kept =
                    try Int.fetchOne(
                        db.cachedStatement(
                            sql: "SELECT COALESCE(SUM(quarantined_bytes), 0) FROM records "
                                + "WHERE provider = ? AND quarantined_bytes IS NOT NULL"),
                        arguments: [provider]) ?? 0
                guard kept > maxBytes else { return (0, kept, nil) }
                let rows = try Row.fetchAll(
                    db.cachedStatement(
                        sql: """
                            SELECT seq, quarantined_bytes AS bytes,
                                EXISTS (SELECT 1 FROM outbox o WHERE o.record_id = r.record_id)
                                    OR EXISTS (SELECT 1 FROM dead_letters d WHERE d.record_id = r.record_id) AS waiting
                            FROM records r
                            WHERE provider = ? AND quarantined_bytes IS NOT NULL AND seq > ? ORDER BY seq LIMIT 500
                            """),
                    arguments: [provider, after])
                var dropped = 0
                for row in rows where kept > maxBytes && !(row["waiting"] as Bool) {
                    try db.executeCached("DELETE FROM records WHERE seq = ?", [row["seq"] as Int64])
                    kept -= row["bytes"] as Int
                    dropped += 1
                }
                return (dropped, kept, kept > maxBytes ? rows.last?["seq"] : nil)
            }
            trim.dropped += dropped
            trim.keptBytes = kept
            guard let last else { return trim }
            after = last
        }
    }

    /// The stored record with this id.
    public func record(id: String) async throws -> AttributionRecord? {
        try await pool.read { db in
            try Row.fetchOne(
                db.cachedStatement(
                    sql: "SELECT \(StoredColumns.selectList()) FROM records WHERE record_id = ?"),
                arguments: [id]
            ).map { try Self.record(of: $0) }
        }
    }

    /// `values` as one bound JSON array, read with `json_each`: one statement for any number
    /// of values, whatever SQLite's limit on parameters.
    public static func jsonArray(_ values: [String]) -> String {
        String(decoding: (try? JSONEncoder().encode(values)) ?? Data("[]".utf8), as: UTF8.self)
    }
}
