import Foundation
import GRDB
import GatewayCompactRaw
import GatewayCore

/// Pending work: accepted payloads whose records wait for an outside answer.
extension SQLiteStore {
    /// Shares commits with concurrent requests (see ``GroupCommit``): a token stored is
    /// one row in a transaction many tokens share.
    ///
    /// Work is a duplicate only of its own app's: the same key sent for another app (a
    /// token posted with another app's API key) is stored apart, under the key with the
    /// app appended, so that one app can neither learn of another's record nor, by
    /// posting a token first, keep that app from getting its own.
    public func addPending(_ work: PendingWork, now: Date) async throws -> PendingAdmission {
        try await groupCommit.submit { db in
            let ownKey = Self.appScopedKey(work.dedupeKey, appID: work.appID)
            var keyTaken = false
            for (table, resolved) in [("records", true), ("pending", false)] {
                let rows = try Row.fetchAll(
                    db.cachedStatement(
                        sql: "SELECT record_id, app_id, dedupe_key FROM \(table) WHERE dedupe_key IN (?, ?)"),
                    arguments: [work.dedupeKey, ownKey])
                if let mine = rows.first(where: { $0["app_id"] as String? == work.appID }) {
                    return .duplicate(of: mine["record_id"], resolved: resolved)
                }
                keyTaken = keyTaken || rows.contains { $0["dedupe_key"] as String == work.dedupeKey }
            }
            let key = keyTaken ? ownKey : work.dedupeKey
            try db.executeCached(
                """
                INSERT INTO pending (record_id, provider, dedupe_key, app_id, received_at, state, attempts, next_attempt_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    work.recordID, work.provider, key, work.appID, work.receivedAt.timeIntervalSince1970,
                    work.state, work.attempts, now.timeIntervalSince1970,
                ])
            return .accepted(recordID: work.recordID)
        }
    }

    /// `key` as one app's own, for when another app's work holds the plain one.
    static func appScopedKey(_ key: String, appID: String?) -> String {
        key + "@" + (appID ?? "")
    }

    public func claimPending(provider: String, now: Date, lease: Duration, limit: Int) async throws -> [PendingWork] {
        let leaseEnd = now.addingTimeInterval(lease / .seconds(1))
        return try await pool.write { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT record_id, dedupe_key, app_id, received_at, state, attempts FROM pending
                    WHERE provider = ? AND next_attempt_at <= ? ORDER BY next_attempt_at, received_at LIMIT ?
                    """,
                arguments: [provider, now.timeIntervalSince1970, limit])
            let work = rows.map { row in
                PendingWork(
                    recordID: row["record_id"], provider: provider, dedupeKey: row["dedupe_key"], appID: row["app_id"],
                    receivedAt: Date(timeIntervalSince1970: row["received_at"]), state: row["state"],
                    attempts: row["attempts"])
            }
            for item in work {
                try db.executeCached(
                    "UPDATE pending SET next_attempt_at = ?, claimed_until = ? WHERE record_id = ?",
                    [leaseEnd.timeIntervalSince1970, leaseEnd.timeIntervalSince1970, item.recordID])
            }
            return work
        }
    }

    /// Work waiting for its answer, in record id order after `cursor` (a record id; nil
    /// from the start), without claiming it: for reports.
    public func waitingWork(after cursor: String?, limit: Int) async throws -> [PendingWork] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT record_id, provider, dedupe_key, app_id, received_at, state, attempts FROM pending
                    WHERE ?1 IS NULL OR record_id > ?1 ORDER BY record_id LIMIT ?2
                    """,
                arguments: [cursor, limit]
            ).map { row in
                PendingWork(
                    recordID: row["record_id"], provider: row["provider"], dedupeKey: row["dedupe_key"],
                    appID: row["app_id"], receivedAt: Date(timeIntervalSince1970: row["received_at"]),
                    state: row["state"], attempts: row["attempts"])
            }
        }
    }

    /// Hands back, due now, the work that claims still hide: for a server starting on a
    /// store no other process serves (``ServeLock``), every claim is a dead process's, and
    /// its work would otherwise wait out the lease. Returns how many.
    public func releaseClaims(now: Date) async throws -> Int {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE pending SET next_attempt_at = ?, claimed_until = NULL WHERE claimed_until IS NOT NULL",
                arguments: [now.timeIntervalSince1970])
            return db.changesCount
        }
    }

    public func nextPendingDate(provider: String) async throws -> Date? {
        try await pool.read { db in
            try Double.fetchOne(
                db.cachedStatement(sql: "SELECT MIN(next_attempt_at) FROM pending WHERE provider = ?"),
                arguments: [provider]
            ).map { Date(timeIntervalSince1970: $0) }
        }
    }

    public func settlePending(_ settlements: [PendingSettlement]) async throws -> [String: [IngestResult]] {
        guard !settlements.isEmpty else { return [:] }
        let (results, outcome) = try await Self.outboxIfInlineFails(inlineSinks.writes) { inline in
            // Encoding happens before the write lock is taken.
            let encoded = settlements.map { settlement -> (PendingSettlement, [PreparedRecord]) in
                if case .finished(_, let records) = settlement {
                    return (settlement, self.prepare(records, inline: inline))
                }
                return (settlement, [])
            }
            return try await self.pool.write { db in
                var results: [String: [IngestResult]] = [:]
                var outcome = InlineOutcome()
                for (settlement, prepared) in encoded {
                    switch settlement {
                    case .finished(let recordID, let records):
                        // Work a forget request dropped meanwhile stores nothing of its user.
                        try db.executeCached("DELETE FROM pending WHERE record_id = ?", [recordID])
                        guard db.changesCount > 0 else { continue }
                        let (stored, inlined) = try Self.insert(
                            records, prepared: prepared, inline: inline, queuedAt: self.now(), db)
                        results[recordID] = stored
                        outcome.add(inlined)
                    case .retry(let recordID, let state, let attempts, let at, let error):
                        try db.executeCached(
                            "UPDATE pending SET state = ?, attempts = ?, next_attempt_at = ?, last_error = ?, claimed_until = NULL WHERE record_id = ?",
                            [state, attempts, at.timeIntervalSince1970, error, recordID])
                    }
                }
                return (results, outcome)
            }
        }
        inlineSinks.report(outcome)
        return results
    }

    public func isPending(recordID: String) async throws -> Bool {
        try await pool.read { db in
            try Bool.fetchOne(
                db, sql: "SELECT EXISTS(SELECT 1 FROM pending WHERE record_id = ?)", arguments: [recordID])
                ?? false
        }
    }

    public func pendingCounts() async throws -> [String: Int] {
        try await pool.read { db in
            var counts: [String: Int] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT provider, COUNT(*) AS n FROM pending GROUP BY provider") {
                counts[row["provider"]] = row["n"]
            }
            return counts
        }
    }
}

/// Late versions of stored records.
extension SQLiteStore {
    public func replaceRecords(_ records: [RoutedRecord], now: Date) async throws -> Int {
        guard !records.isEmpty else { return 0 }
        // Late versions go through the outbox even for inline sinks: the row to replace may
        // be in flight with its worker right now.
        let stored = records.map { $0.record.encoded().stored }
        return try await pool.write { db in
            var replaced = 0
            for (item, stored) in zip(records, stored) {
                try db.executeCached(
                    "UPDATE records SET body = ?, raw = ?, quarantined_bytes = ? WHERE record_id = ? AND dedupe_key = ?",
                    [
                        stored.body, stored.raw.map { Data($0) },
                        item.record.isQuarantined ? stored.size : nil,
                        item.record.recordID, item.record.dedupeKey,
                    ])
                guard db.changesCount > 0 else { continue }
                replaced += 1
                for sink in item.sinks {
                    // A new row, not the old one: a worker delivering the old version
                    // right now resolves the old row's id, so this one still goes out. It
                    // keeps the old row's queueing time and position, and so its place in
                    // its device's order, even among rows queued in the same commit.
                    let queued = try Row.fetchOne(
                        db.cachedStatement(
                            sql:
                                "SELECT created_at, COALESCE(position, id) AS position FROM outbox WHERE sink = ? AND record_id = ?"
                        ),
                        arguments: [sink, item.record.recordID])
                    try db.executeCached(
                        "DELETE FROM outbox WHERE sink = ? AND record_id = ?", [sink, item.record.recordID])
                    let createdAt: Double? = queued?["created_at"]
                    let position: Int64? = queued?["position"]
                    try db.executeCached(
                        """
                        INSERT INTO outbox (sink, record_id, attempts, next_attempt_at, created_at, lane, position)
                        VALUES (?, ?, 0, ?, ?, ?, ?)
                        """,
                        [
                            sink, item.record.recordID, now.timeIntervalSince1970,
                            createdAt ?? now.timeIntervalSince1970,
                            item.record.deliveryLane, position,
                        ])
                }
            }
            return replaced
        }
    }
}
