import Foundation
import GatewayCompactRaw
import GatewayCore
import PostgresNIO

/// Accepted records: one statement writes a record, or a whole batch, with its outbox rows,
/// and a unique dedupe key makes a second copy, from any replica, a duplicate of the first.
extension PostgresStore {
    public func ingest(_ batch: [RoutedRecord]) async throws -> [IngestResult] {
        guard !batch.isEmpty else { return [] }
        let queuedAt = now()
        if let listed = InlineListed(batch, listings: inlineListings.current) {
            return try await ingestListing(batch, listed, queuedAt: queuedAt)
        }
        return try await write(batch, queuedAt: queuedAt, list: nil)
    }

    /// Writes `batch` with its outbox rows and, with `list`, its listed records' places.
    func write(_ batch: [RoutedRecord], queuedAt: Date, list: InlineListed?) async throws -> [IngestResult] {
        // One record is one statement, atomic on its own: no transaction's extra round trips.
        if batch.count == 1 {
            return try await connection { [logger] connection in
                try await Self.insert(batch, queuedAt: queuedAt, list: list, on: connection, logger: logger)
            }
        }
        return try await transaction { [logger] connection in
            try await Self.insert(batch, queuedAt: queuedAt, list: list, on: connection, logger: logger)
        }
    }

    /// Inserts records and their outbox rows on `connection` (in the caller's transaction,
    /// if any), and with `list` the places of its records in their list instead of outbox
    /// rows for the listed sinks. The sinks' rows count from `queuedAt`, not the record's
    /// `received_at`, which may be long past (an import of history).
    static func insert(
        _ batch: [RoutedRecord], queuedAt: Date, list: InlineListed? = nil, on connection: PostgresConnection,
        logger: Logger
    ) async throws -> [IngestResult] {
        let batch = list?.outboxBatch ?? batch
        if batch.count > 1 {
            return try await insertMany(batch, queuedAt: queuedAt, list: list, on: connection, logger: logger)
        }
        let now = seconds(queuedAt)
        var results: [IngestResult] = []
        for (index, item) in batch.enumerated() {
            let record = item.record
            let (body, raw, size) = record.encoded(codedKeys: true).stored
            let listing = list.map { $0.flags[index] ? $0.insertion(from: "stored") : "" } ?? ""
            let quarantinedBytes = record.isQuarantined ? size : nil
            // Waits for a concurrent insert of the same key to end; if it committed, this one
            // is the duplicate and the next statement sees the original.
            let rows = try await connection.query(
                """
                WITH stored AS (
                    INSERT INTO records (record_id, dedupe_key, provider, app_id, received_at, body, raw,
                        quarantined_bytes)
                    VALUES (\(record.recordID), \(record.dedupeKey), \(record.provider), \(record.appID),
                        \(seconds(record.receivedAt)), \(body), \(raw.map { Data($0) }), \(quarantinedBytes))
                    ON CONFLICT ((md5(dedupe_key)::uuid)) DO NOTHING RETURNING seq
                ), queued AS (
                    INSERT INTO outbox (sink, record_seq, attempts, next_attempt_at, created_at, lane)
                    SELECT s.sink, stored.seq, 0, \(now), \(now), \(record.deliveryLane)
                    FROM stored CROSS JOIN unnest(\(item.sinks)::text[]) AS s(sink)
                )\(unescaped: listing)
                SELECT count(*) FROM stored
                """, logger: logger)
            var stored = false
            for try await count in rows.decode(Int64.self) { stored = count > 0 }
            if stored {
                results.append(.stored(recordID: record.recordID))
            } else {
                let original = try await firstString(
                    connection.query(
                        recordsByDedupeKey([record.dedupeKey], select: "record_id"), logger: logger))
                results.append(.duplicate(of: original ?? record.recordID))
            }
        }
        return results
    }

    /// A batch in one statement: a statement per record cost the server a parse and plan,
    /// and the importer a round trip, for each record (an import into PostgreSQL ran at a
    /// fifth of SQLite's rate). The records go as column arrays, unnested in input order, so
    /// `records.seq` and the outbox ids (a device's delivery order) follow the batch's order
    /// as one statement per record made them. PostgresNIO binds no array with NULL elements,
    /// so each nullable column comes with a mask of which elements are NULL; the value beside
    /// a set mask is a placeholder that is never read. A key met twice in the batch is
    /// stored once, from its first record: `ON CONFLICT DO NOTHING` skips a row whose key an
    /// earlier row of the same statement inserted. Records that were not stored find their
    /// original in a second statement, which, unlike the first one's snapshot, sees a copy
    /// another replica committed while this insert waited for it.
    static func insertMany(
        _ batch: [RoutedRecord], queuedAt: Date, list: InlineListed?, on connection: PostgresConnection,
        logger: Logger
    ) async throws -> [IngestResult] {
        let now = seconds(queuedAt)
        let count = batch.count
        var recordIDs: [String] = [], dedupeKeys: [String] = [], providers: [String] = []
        var appIDs: [String] = [], appIDIsNull: [Bool] = []
        var receivedAts: [Double] = [], bodies: [String] = []
        var raws: [ByteBuffer] = [], rawIsNull: [Bool] = []
        var quarantined: [Int64] = [], quarantinedIsNull: [Bool] = []
        var lanes: [String] = [], laneIsNull: [Bool] = []
        var sinkOrdinals: [Int64] = [], sinks: [String] = []
        let listFlags = list?.flags ?? [Bool](repeating: false, count: count)
        let listing = list?.insertion(from: "inserted JOIN input ON input.ord = inserted.ord WHERE input.listed") ?? ""
        for (index, item) in batch.enumerated() {
            let record = item.record
            let (body, raw, size) = record.encoded(codedKeys: true).stored
            let quarantinedBytes = record.isQuarantined ? size : nil
            recordIDs.append(record.recordID)
            dedupeKeys.append(record.dedupeKey)
            providers.append(record.provider)
            appIDs.append(record.appID ?? "")
            appIDIsNull.append(record.appID == nil)
            receivedAts.append(seconds(record.receivedAt))
            bodies.append(body)
            raws.append(ByteBuffer(bytes: raw ?? []))
            rawIsNull.append(raw == nil)
            quarantined.append(Int64(quarantinedBytes ?? 0))
            quarantinedIsNull.append(quarantinedBytes == nil)
            let lane = record.deliveryLane
            lanes.append(lane ?? "")
            laneIsNull.append(lane == nil)
            for sink in item.sinks {
                sinkOrdinals.append(Int64(index + 1))
                sinks.append(sink)
            }
        }
        // Waits for a concurrent insert of a key to end; if it committed, that record is a
        // duplicate here, found by the second statement below.
        let rows = try await connection.query(
            """
            WITH input AS MATERIALIZED (
                SELECT * FROM unnest(\(recordIDs)::text[], \(dedupeKeys)::text[], \(providers)::text[],
                    \(appIDs)::text[], \(appIDIsNull)::bool[], \(receivedAts)::float8[], \(bodies)::text[],
                    \(raws)::bytea[], \(rawIsNull)::bool[], \(quarantined)::int8[], \(quarantinedIsNull)::bool[],
                    \(lanes)::text[], \(laneIsNull)::bool[], \(listFlags)::bool[]) WITH ORDINALITY
                AS i(record_id, dedupe_key, provider, app_id, app_id_null, received_at, body,
                    raw, raw_null, quarantined_bytes, quarantined_null, lane, lane_null, listed, ord)
            ), stored AS (
                INSERT INTO records (record_id, dedupe_key, provider, app_id, received_at, body, raw,
                    quarantined_bytes)
                SELECT record_id, dedupe_key, provider, CASE WHEN app_id_null THEN NULL ELSE app_id END,
                    received_at, body, CASE WHEN raw_null THEN NULL ELSE raw END,
                    CASE WHEN quarantined_null THEN NULL ELSE quarantined_bytes END
                FROM input ORDER BY ord
                ON CONFLICT ((md5(dedupe_key)::uuid)) DO NOTHING RETURNING seq, record_id, dedupe_key
            ), inserted AS (
                SELECT min(input.ord) AS ord, stored.seq FROM stored
                JOIN input ON input.record_id = stored.record_id AND input.dedupe_key = stored.dedupe_key
                GROUP BY stored.record_id, stored.seq
            ), queued AS (
                INSERT INTO outbox (sink, record_seq, attempts, next_attempt_at, created_at, lane)
                SELECT s.sink, inserted.seq, 0, \(now), \(now), CASE WHEN input.lane_null THEN NULL ELSE input.lane END
                FROM unnest(\(sinkOrdinals)::int8[], \(sinks)::text[]) WITH ORDINALITY AS s(ord, sink, n)
                JOIN inserted ON inserted.ord = s.ord JOIN input ON input.ord = s.ord
                ORDER BY s.n
            )\(unescaped: listing)
            SELECT ord FROM inserted
            """, logger: logger)
        var stored = [Bool](repeating: false, count: count)
        for try await ord in rows.decode(Int64.self) { stored[Int(ord) - 1] = true }
        // The record each key names: one stored here, or, for the rest, the one already there.
        // Keys by their bytes, as the database compares them, not by `String` equality.
        let keys = dedupeKeys.map { DedupeKey.Bytes($0) }
        var originals: [DedupeKey.Bytes: String] = [:]
        for index in 0..<count where stored[index] { originals[keys[index]] = recordIDs[index] }
        var missing: [String] = []
        var asked: Set<DedupeKey.Bytes> = []
        for index in 0..<count where originals[keys[index]] == nil && asked.insert(keys[index]).inserted {
            missing.append(dedupeKeys[index])
        }
        if !missing.isEmpty {
            let found = try await connection.query(Self.recordsByDedupeKey(missing), logger: logger)
            for try await (key, id) in found.decode((String, String).self) { originals[DedupeKey.Bytes(key)] = id }
        }
        return (0..<count).map { index in
            stored[index]
                ? .stored(recordID: recordIDs[index])
                : .duplicate(of: originals[keys[index]] ?? recordIDs[index])
        }
    }

    public func existingRecordIDs(dedupeKeys: [String]) async throws -> [DedupeKey.Bytes: String] {
        guard !dedupeKeys.isEmpty else { return [:] }
        var found: [DedupeKey.Bytes: String] = [:]
        let rows = try await query(Self.recordsByDedupeKey(dedupeKeys), logger: logger)
        for try await (key, id) in rows.decode((String, String).self) { found[DedupeKey.Bytes(key)] = id }
        return found
    }

    /// The `columns` of the records of `keys`, found through the keys' digests, which the
    /// index holds (`store-v8-dedupe-key-digest`).
    static func recordsByDedupeKey(_ keys: [String], select columns: String = "dedupe_key, record_id")
        -> PostgresQuery
    {
        """
        SELECT \(unescaped: columns) FROM records
        WHERE md5(dedupe_key)::uuid = ANY(ARRAY(SELECT md5(k)::uuid FROM unnest(\(keys)::text[]) AS k))
            AND dedupe_key = ANY(\(keys)::text[])
        """
    }

    public func record(id: String) async throws -> AttributionRecord? {
        let rows = try await query(
            "SELECT \(unescaped: StoredColumns.selectList()) FROM gateway_records(ARRAY[\(id)::text])", logger: logger)
        for try await row in rows { return try Self.record(of: row.makeRandomAccess()) }
        return nil
    }

    public func readableRecords(matching filter: ReplayFilter, after cursor: Int64, limit: Int) async throws
        -> (records: [(recordID: String, record: AttributionRecord?)], cursor: Int64)
    {
        let rows = try await query(
            """
            SELECT seq, \(unescaped: StoredColumns.selectList()) FROM records
            WHERE (\(filter.since.map(Self.seconds))::float8 IS NULL OR received_at >= \(filter.since.map(Self.seconds)))
                AND (\(filter.provider)::text IS NULL OR provider = \(filter.provider)) AND seq > \(cursor)
            ORDER BY seq LIMIT \(Int64(limit))
            """, logger: logger)
        var records: [(recordID: String, record: AttributionRecord?)] = []
        var last = cursor
        for try await row in rows {
            let cells = row.makeRandomAccess()
            records.append((try cells["record_id"].decode(String.self), try? Self.record(of: cells)))
            last = try cells["seq"].decode(Int64.self)
        }
        return (records, last)
    }

    public func countRecords(matching filter: ReplayFilter) async throws -> Int {
        let rows = try await query(
            """
            SELECT count(*) FROM records
            WHERE (\(filter.since.map(Self.seconds))::float8 IS NULL OR received_at >= \(filter.since.map(Self.seconds)))
                AND (\(filter.provider)::text IS NULL OR provider = \(filter.provider))
            """, logger: logger)
        for try await count in rows.decode(Int64.self) { return Int(count) }
        return 0
    }

    /// A new outbox row per sink, not the old one: a worker delivering the old version
    /// right now resolves the old row's id, so this one still goes out. It keeps the old
    /// row's queueing time and position, and so its place in its device's order.
    public func replaceRecords(_ records: [RoutedRecord], now: Date) async throws -> Int {
        guard !records.isEmpty else { return 0 }
        let at = Self.seconds(now)
        return try await transaction { [logger] connection in
            var replaced = 0
            for item in records {
                let record = item.record
                let (body, raw, size) = record.encoded(codedKeys: true).stored
                let quarantinedBytes = record.isQuarantined ? size : nil
                let updated = try await Self.firstInt(
                    connection.query(
                        """
                        UPDATE records SET body = \(body), raw = \(raw.map { Data($0) }),
                            received_at = \(Self.seconds(record.receivedAt)), quarantined_bytes = \(quarantinedBytes)
                        WHERE seq = (SELECT seq FROM gateway_records(ARRAY[\(record.recordID)::text]))
                            AND dedupe_key = \(record.dedupeKey)
                        RETURNING seq
                        """, logger: logger))
                guard let seq = updated else { continue }
                replaced += 1
                for sink in item.sinks {
                    _ = try await connection.query(
                        """
                        WITH old AS (
                            DELETE FROM outbox WHERE sink = \(sink) AND record_seq = \(seq)
                            RETURNING created_at, COALESCE(position, id) AS position)
                        INSERT INTO outbox (sink, record_seq, attempts, next_attempt_at, created_at, lane, position)
                        SELECT \(sink), \(seq), 0, \(at), COALESCE((SELECT created_at FROM old), \(at)),
                            \(record.deliveryLane), (SELECT position FROM old)
                        """, logger: logger)
                }
            }
            return replaced
        }
    }

    /// A few hundred records per transaction, under a lock that makes replicas trimming at
    /// once take turns (each would otherwise drop what the other is dropping too).
    public func trimQuarantined(provider: String, maxBytes: Int) async throws -> QuarantineTrim {
        var trim = QuarantineTrim(dropped: 0, keptBytes: 0)
        var after: Int64 = 0
        while true {
            let (dropped, kept, last) = try await transaction { [logger, after] connection -> (Int, Int, Int64?) in
                _ = try await connection.query("SELECT pg_advisory_xact_lock(\(Self.quarantineLock))", logger: logger)
                var kept = Int(
                    try await Self.firstInt(
                        connection.query(
                            """
                            SELECT COALESCE(sum(quarantined_bytes), 0)::bigint FROM records
                            WHERE provider = \(provider) AND quarantined_bytes IS NOT NULL
                            """, logger: logger)) ?? 0)
                guard kept > maxBytes else { return (0, kept, nil) }
                let rows = try await connection.query(
                    """
                    SELECT seq, quarantined_bytes,
                        EXISTS (SELECT 1 FROM outbox o WHERE o.record_seq = r.seq)
                            OR EXISTS (SELECT 1 FROM dead_letters d WHERE d.record_seq = r.seq)
                    FROM records r
                    WHERE provider = \(provider) AND quarantined_bytes IS NOT NULL AND seq > \(after)
                    ORDER BY seq LIMIT 500
                    """, logger: logger)
                var chosen: [Int64] = []
                var last: Int64?
                for try await (seq, bytes, waiting) in rows.decode((Int64, Int64, Bool).self) {
                    last = seq
                    guard kept > maxBytes, !waiting else { continue }
                    chosen.append(seq)
                    kept -= Int(bytes)
                }
                if !chosen.isEmpty {
                    _ = try await connection.query(
                        "DELETE FROM records WHERE seq = ANY(\(chosen)::bigint[])", logger: logger)
                }
                return (chosen.count, kept, kept > maxBytes ? last : nil)
            }
            trim.dropped += dropped
            trim.keptBytes = kept
            guard let last else { return trim }
            after = last
        }
    }

    /// Any 64-bit number no other application of the database uses for its own lock.
    static let quarantineLock: Int64 = 0x4154_5452_4757_0002

    /// The record a row's columns of ``StoredColumns/selectList(of:)`` hold; without
    /// `withRaw`, without its raw payload kept apart.
    static func record(of row: PostgresRandomAccessRow, withRaw: Bool = true) throws -> AttributionRecord {
        let columns = StoredColumns(
            recordID: try row["record_id"].decode(String.self), dedupeKey: try row["dedupe_key"].decode(String.self),
            provider: try row["provider"].decode(String.self), appID: try row["app_id"].decode(String?.self),
            receivedAt: try row["received_at"].decode(Double.self))
        let raw = withRaw ? try row["raw"].decode(Data?.self) : nil
        return try AttributionRecord(
            body: Data(try row["body"].decode(String.self).utf8), keptApart: columns,
            compactRaw: raw.map { [UInt8]($0) })
    }

    static func firstString(_ rows: PostgresRowSequence) async throws -> String? {
        for try await value in rows.decode(String?.self) { return value }
        return nil
    }

    static func firstInt(_ rows: PostgresRowSequence) async throws -> Int64? {
        for try await value in rows.decode(Int64?.self) { return value }
        return nil
    }
}
