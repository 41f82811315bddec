import Foundation
import GatewayCore
import PostgresNIO

/// Outboxes shared by replicas: a due row is claimed by moving its next attempt to the end
/// of the lease, in the statement that selects it (`FOR UPDATE SKIP LOCKED`, so replicas
/// never wait on each other's rows). The worker's resolution replaces that time; a replica
/// that dies first leaves the row to come due again when the lease ends, and one that stops
/// gives back what it leaves unresolved (`unclaim`).
extension PostgresStore {
    /// Rows a row of the same lane queued earlier holds back (see `SQLiteStore`).
    static let behindItsLane = """
        (o.lane IS NOT NULL AND EXISTS (SELECT 1 FROM outbox p WHERE p.sink = o.sink AND p.lane = o.lane
            AND COALESCE(p.position, p.id) < COALESCE(o.position, o.id)))
        """

    public func dueEntries(sink: String, now: Date, limit: Int, laneOrdered: Bool) async throws -> [OutboxEntry] {
        let leaseEnd = Self.seconds(now.addingTimeInterval(outboxLease / .seconds(1)))
        let lanes = laneOrdered ? "AND NOT \(Self.behindItsLane)" : ""
        let claim: PostgresQuery = """
            WITH due AS (
                SELECT o.id, o.next_attempt_at AS due_at FROM outbox o
                WHERE o.sink = \(sink) AND o.next_attempt_at <= \(Self.seconds(now)) \(unescaped: lanes)
                ORDER BY o.next_attempt_at, o.id LIMIT \(Int64(limit))
                FOR UPDATE OF o SKIP LOCKED)
            UPDATE outbox o SET next_attempt_at = \(leaseEnd)
            FROM due JOIN outbox q ON q.id = due.id JOIN records r ON r.seq = q.record_seq
            WHERE o.id = due.id
            RETURNING o.id, o.attempts, o.created_at, o.sending_since, due.due_at, o.next_attempt_at,
                \(unescaped: StoredColumns.selectList(of: "r"))
            """
        let rows = try await query(claim, logger: logger)
        var claimed: [(entry: OutboxEntry, dueAt: Double)] = []
        for try await row in rows {
            let cells = row.makeRandomAccess()
            let (id, attempts, createdAt, sendingSince, dueAt, until) = try row.decode(
                (Int64, Int64, Double, Double?, Double, Double).self)
            var entry: OutboxEntry
            do {
                entry = OutboxEntry(
                    id: id, record: try Self.record(of: cells), attempts: Int(attempts), queuedAt: Self.date(createdAt))
                entry.wasBeingSent = sendingSince != nil
            } catch {
                entry = .unreadable(
                    id: id, attempts: Int(attempts), reason: "the stored record cannot be read: \(error)")
            }
            entry.claim = OutboxClaim(dueAt: dueAt, until: until)
            claimed.append((entry, dueAt))
        }
        return claimed.sorted { ($0.dueAt, $0.entry.id) < ($1.dueAt, $1.entry.id) }.map(\.entry)
    }

    public func nextDueDate(sink: String, laneOrdered: Bool) async throws -> Date? {
        let lanes = laneOrdered ? "AND NOT \(Self.behindItsLane)" : ""
        let rows = try await query(
            "SELECT MIN(o.next_attempt_at) FROM outbox o WHERE o.sink = \(sink) \(unescaped: lanes)", logger: logger)
        for try await next in rows.decode(Double?.self) { return next.map(Self.date) }
        return nil
    }

    public func resolve(sink: String, _ resolutions: [OutboxResolution], now: Date) async throws {
        guard !resolutions.isEmpty else { return }
        var delivered: [Int64] = []
        var others: [OutboxResolution] = []
        for resolution in resolutions {
            if case .delivered(let id) = resolution { delivered.append(id) } else { others.append(resolution) }
        }
        let failedAt = Self.seconds(now)
        try await transaction { [logger, delivered, others] connection in
            if !delivered.isEmpty {
                _ = try await connection.query(
                    "DELETE FROM outbox WHERE id = ANY(\(delivered)::bigint[])", logger: logger)
            }
            for resolution in others {
                switch resolution {
                case .delivered: break
                case .retry(let id, let attempts, let at, let error):
                    _ = try await connection.query(
                        """
                        UPDATE outbox SET attempts = \(Int64(attempts)), next_attempt_at = \(Self.seconds(at)),
                            last_error = \(error), sending_since = NULL
                        WHERE id = \(id)
                        """, logger: logger)
                case .deadLetter(let id, let attempts, let error):
                    // A new dead letter, newest first, replacing one of the same record.
                    _ = try await connection.query(
                        """
                        WITH moved AS (DELETE FROM outbox WHERE id = \(id) RETURNING sink, record_seq),
                        replaced AS (
                            DELETE FROM dead_letters d USING moved m WHERE d.sink = m.sink AND d.record_seq = m.record_seq)
                        INSERT INTO dead_letters (sink, record_seq, attempts, error, failed_at)
                        SELECT sink, record_seq, \(Int64(attempts)), \(error), \(failedAt) FROM moved
                        """, logger: logger)
                }
            }
        }
    }

    /// Only rows whose next attempt is still the lease this claim wrote: a row resolved
    /// since has another (or is gone), and one whose lease ran out and another replica
    /// claimed has that replica's.
    public func unclaim(sink: String, _ entries: [OutboxEntry]) async throws {
        let claims = entries.compactMap { entry in entry.claim.map { (entry.id, $0) } }
        guard !claims.isEmpty else { return }
        let ids = claims.map(\.0), dueAt = claims.map(\.1.dueAt), until = claims.map(\.1.until)
        _ = try await query(
            """
            UPDATE outbox o SET next_attempt_at = c.due_at
            FROM unnest(\(ids)::bigint[], \(dueAt)::float8[], \(until)::float8[]) AS c (id, due_at, until)
            WHERE o.id = c.id AND o.sink = \(sink) AND o.next_attempt_at = c.until
            """, logger: logger)
    }

    public func markSending(id: Int64, now: Date) async throws {
        _ = try await query(
            "UPDATE outbox SET sending_since = \(Self.seconds(now)) WHERE id = \(id)", logger: logger)
    }

    public func holdLanes(sink: String, behind heads: [(id: Int64, until: Date)]) async throws {
        guard !heads.isEmpty else { return }
        try await transaction { [logger] connection in
            for head in heads {
                _ = try await connection.query(
                    """
                    UPDATE outbox SET next_attempt_at = GREATEST(next_attempt_at, \(Self.seconds(head.until)))
                    WHERE sink = \(sink) AND id != \(head.id) AND lane = (SELECT lane FROM outbox WHERE id = \(head.id))
                    """, logger: logger)
            }
        }
    }

    public func outboxStats() async throws -> [String: OutboxStats] {
        var stats: [String: OutboxStats] = [:]
        let rows = try await query(
            "SELECT sink, count(*), MIN(created_at) FROM outbox GROUP BY sink", logger: logger)
        for try await (sink, depth, oldest) in rows.decode((String, Int64, Double?).self) {
            stats[sink] = OutboxStats(depth: Int(depth), oldest: oldest.map(Self.date))
        }
        return stats
    }

    public func enqueue(recordIDs: [String], sink: String, now: Date) async throws -> Int {
        guard !recordIDs.isEmpty else { return 0 }
        let at = Self.seconds(now)
        return try await transaction { [logger] connection in
            let queued = try await Self.firstInt(
                connection.query(
                    """
                    WITH queued AS (
                        INSERT INTO outbox (sink, record_seq, attempts, next_attempt_at, created_at, lane)
                        SELECT \(sink), r.seq, 0, \(at), \(at), gateway_lane(r.app_id, r.body)
                        FROM gateway_records(\(recordIDs)::text[]) r
                        ON CONFLICT (sink, record_seq) DO NOTHING RETURNING 1)
                    SELECT count(*) FROM queued
                    """, logger: logger))
            // A dead letter of a record queued again is being retried, as `dlq retry` does.
            _ = try await connection.query(
                """
                DELETE FROM dead_letters d
                WHERE d.sink = \(sink) AND d.record_seq IN (SELECT seq FROM gateway_records(\(recordIDs)::text[]))
                    AND EXISTS (SELECT 1 FROM outbox o WHERE o.sink = d.sink AND o.record_seq = d.record_seq)
                """, logger: logger)
            return Int(queued ?? 0)
        }
    }
}
