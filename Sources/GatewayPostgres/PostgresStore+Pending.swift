import Foundation
import GatewayCore
import PostgresNIO

/// Pending work shared by replicas: claimed with `FOR UPDATE SKIP LOCKED` under a lease,
/// so that one replica attempts each token at a time and a dead one's claims come back.
extension PostgresStore {
    /// Work is a duplicate only of its own app's (see `SQLiteStore.addPending`): the same
    /// key sent for another app is stored apart, under the key with the app appended.
    public func addPending(_ work: PendingWork, now: Date) async throws -> PendingAdmission {
        let ownKey = work.dedupeKey + "@" + (work.appID ?? "")
        // A replica inserting the same key at the same moment makes this insert wait and
        // then conflict; the next round finds its row.
        for _ in 0..<3 {
            var keyTaken = false
            let keys = [work.dedupeKey, ownKey]
            let lookups: [(PostgresQuery, resolved: Bool)] = [
                (Self.recordsByDedupeKey(keys, select: "record_id, app_id, dedupe_key"), true),
                ("SELECT record_id, app_id, dedupe_key FROM pending WHERE dedupe_key = ANY(\(keys)::text[])", false),
            ]
            for (lookup, resolved) in lookups {
                let rows = try await query(lookup, logger: logger)
                for try await (recordID, appID, key) in rows.decode((String, String?, String).self) {
                    if appID == work.appID { return .duplicate(of: recordID, resolved: resolved) }
                    keyTaken = keyTaken || key == work.dedupeKey
                }
            }
            let inserted = try await Self.firstInt(
                query(
                    """
                    WITH added AS (
                        INSERT INTO pending (record_id, provider, dedupe_key, app_id, received_at, state, attempts,
                            next_attempt_at)
                        VALUES (\(work.recordID), \(work.provider), \(keyTaken ? ownKey : work.dedupeKey), \(work.appID),
                            \(Self.seconds(work.receivedAt)), \(work.state), \(Int64(work.attempts)), \(Self.seconds(now)))
                        ON CONFLICT DO NOTHING RETURNING 1)
                    SELECT count(*) FROM added
                    """, logger: logger))
            if inserted ?? 0 > 0 { return .accepted(recordID: work.recordID) }
        }
        throw StoreNotReady(reason: "the same pending work kept being added by another replica")
    }

    public func claimPending(provider: String, now: Date, lease: Duration, limit: Int) async throws -> [PendingWork] {
        let leaseEnd = Self.seconds(now.addingTimeInterval(lease / .seconds(1)))
        let rows = try await query(
            """
            WITH due AS (
                SELECT record_id, next_attempt_at AS due_at FROM pending
                WHERE provider = \(provider) AND next_attempt_at <= \(Self.seconds(now))
                ORDER BY next_attempt_at, received_at LIMIT \(Int64(limit))
                FOR UPDATE SKIP LOCKED)
            UPDATE pending p SET next_attempt_at = \(leaseEnd), claimed_until = \(leaseEnd)
            FROM due WHERE p.record_id = due.record_id
            RETURNING p.record_id, p.dedupe_key, p.app_id, p.received_at, p.state, p.attempts, due.due_at
            """, logger: logger)
        var claimed: [(work: PendingWork, dueAt: Double)] = []
        for try await (recordID, key, appID, receivedAt, state, attempts, dueAt) in rows.decode(
            (String, String, String?, Double, Data, Int64, Double).self)
        {
            claimed.append(
                (
                    PendingWork(
                        recordID: recordID, provider: provider, dedupeKey: key, appID: appID,
                        receivedAt: Self.date(receivedAt), state: state, attempts: Int(attempts)),
                    dueAt
                ))
        }
        return claimed.sorted { ($0.dueAt, $0.work.receivedAt) < ($1.dueAt, $1.work.receivedAt) }.map(\.work)
    }

    public func nextPendingDate(provider: String) async throws -> Date? {
        let rows = try await query(
            "SELECT MIN(next_attempt_at) FROM pending WHERE provider = \(provider)", logger: logger)
        for try await next in rows.decode(Double?.self) { return next.map(Self.date) }
        return nil
    }

    /// Stores finished work's records, listing those of inline listed sinks as ingest does
    /// (``ingestListing(_:_:queuedAt:)``), and the rest's next attempt, in one transaction.
    public func settlePending(_ settlements: [PendingSettlement]) async throws -> [String: [IngestResult]] {
        guard !settlements.isEmpty else { return [:] }
        let queuedAt = now()
        let listings = inlineListings.current
        return try await listingOrQueueing(into: listings.table) { listing in
            try await settle(settlements, queuedAt: queuedAt, listings: listings, listing: listing)
        }
    }

    /// Settles in one transaction, the listed sinks' records listed (`listing`) or queued
    /// in their outboxes, and says which.
    private func settle(
        _ settlements: [PendingSettlement], queuedAt: Date, listings: (sinks: Set<String>, table: String?),
        listing: Bool
    ) async throws -> ([String: [IngestResult]], InlineListings.Outcome) {
        try await transaction { [logger] connection in
            var results: [String: [IngestResult]] = [:]
            var outcome = InlineListings.Outcome()
            for settlement in settlements {
                switch settlement {
                case .finished(let recordID, let records):
                    // Work a forget request dropped meanwhile stores nothing of its user.
                    let removed = try await Self.firstInt(
                        connection.query(
                            """
                            WITH removed AS (DELETE FROM pending WHERE record_id = \(recordID) RETURNING 1)
                            SELECT count(*) FROM removed
                            """, logger: logger))
                    guard (removed ?? 0) > 0 else { continue }
                    let listed = InlineListed(records, listings: listings)
                    let stored = try await Self.insert(
                        records, queuedAt: queuedAt, list: listing ? listed : nil, on: connection, logger: logger)
                    results[recordID] = stored
                    if let listed {
                        outcome.add(listed.outcome(of: records, stored, queuedAt: queuedAt, fellBack: !listing))
                    }
                case .retry(let recordID, let state, let attempts, let at, let error):
                    _ = try await connection.query(
                        """
                        UPDATE pending SET state = \(state), attempts = \(Int64(attempts)),
                            next_attempt_at = \(Self.seconds(at)), last_error = \(error), claimed_until = NULL
                        WHERE record_id = \(recordID)
                        """, logger: logger)
                }
            }
            return (results, outcome)
        }
    }

    public func pendingCounts() async throws -> [String: Int] {
        var counts: [String: Int] = [:]
        let rows = try await query("SELECT provider, count(*) FROM pending GROUP BY provider", logger: logger)
        for try await (provider, count) in rows.decode((String, Int64).self) { counts[provider] = Int(count) }
        return counts
    }

    public func isPending(recordID: String) async throws -> Bool {
        let rows = try await query(
            "SELECT EXISTS (SELECT 1 FROM pending WHERE record_id = \(recordID))", logger: logger)
        for try await found in rows.decode(Bool.self) { return found }
        return false
    }

    /// Work waiting for its answer, in record id order after `cursor`, without claiming it.
    public func waitingWork(after cursor: String?, limit: Int) async throws -> [PendingWork] {
        let rows = try await query(
            """
            SELECT record_id, provider, dedupe_key, app_id, received_at, state, attempts FROM pending
            WHERE \(cursor)::text IS NULL OR record_id > \(cursor) ORDER BY record_id LIMIT \(Int64(limit))
            """, logger: logger)
        var work: [PendingWork] = []
        for try await (recordID, provider, key, appID, receivedAt, state, attempts) in rows.decode(
            (String, String, String, String?, Double, Data, Int64).self)
        {
            work.append(
                PendingWork(
                    recordID: recordID, provider: provider, dedupeKey: key, appID: appID,
                    receivedAt: Self.date(receivedAt), state: state, attempts: Int(attempts)))
        }
        return work
    }
}
