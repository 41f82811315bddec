import Foundation
import GRDB
import GatewayCompactRaw
import GatewayCore

extension SQLiteStore {
    public func forget(_ subject: ForgetSubject, requestID: String, userDigest: String, sinks: [String], now: Date)
        async throws -> ForgetStatus
    {
        let carrier = AttributionRecord.forgetCarrier(requestID: requestID, appID: subject.appID, at: now)
        let at = now.timeIntervalSince1970
        return try await pool.write { db in
            // Freed space is zeroed: the user's ids must not stay readable in the file.
            try db.execute(sql: "PRAGMA secure_delete = ON")
            defer { try? db.execute(sql: "PRAGMA secure_delete = OFF") }
            var sweep = ForgetSweep(subject)
            for _ in 0..<ForgetSweep.maxRounds {
                let ids = sweep.searchIDs
                // Every record of the app is read: the ids live in the bodies, with no index.
                let rows = try Row.fetchAll(
                    db,
                    sql: """
                        SELECT \(StoredColumns.selectList()) FROM records WHERE app_id = ? AND provider <> 'forget' AND json_valid(body) AND (
                            json_extract(body, '$.app_user_id') IN (SELECT value FROM json_each(?))
                            OR json_extract(body, '$.idfv') IN (SELECT value FROM json_each(?))
                            OR json_extract(body, '$.idfa') IN (SELECT value FROM json_each(?)))
                        """,
                    arguments: [
                        subject.appID, Self.jsonArray(ids.appUserIDs), Self.jsonArray(ids.idfvs),
                        Self.jsonArray(ids.idfas),
                    ])
                var found = false
                for row in rows {
                    // A payload that no longer reads (its body was changed by hand) is cleared
                    // by the forget anyway: the user's ids in the body still go.
                    guard let record = (try? Self.record(of: row)) ?? (try? Self.record(of: row, withRaw: false))
                    else { continue }
                    found = sweep.add(record) || found
                }
                if !found { break }
            }
            for record in sweep.reduced() {
                let stored = record.encoded().stored
                try db.executeCached(
                    "UPDATE records SET body = ?, raw = ?, dedupe_key = ? WHERE record_id = ?",
                    [stored.body, stored.raw.map { Data($0) }, record.dedupeKey, record.recordID])
            }
            // Tokens of the user's still waiting for Apple would become records of theirs; the
            // ASA SDK user a token belongs to goes with it.
            let ids = sweep.searchIDs
            let waiting = try Row.fetchAll(
                db,
                sql: """
                    SELECT record_id, state FROM pending WHERE app_id = ? AND json_valid(CAST(state AS TEXT)) AND (
                        json_extract(CAST(state AS TEXT), '$.appUserID') IN (SELECT value FROM json_each(?))
                        OR json_extract(CAST(state AS TEXT), '$.idfv') IN (SELECT value FROM json_each(?))
                        OR json_extract(CAST(state AS TEXT), '$.idfa') IN (SELECT value FROM json_each(?)))
                    """,
                arguments: [
                    subject.appID, Self.jsonArray(ids.appUserIDs), Self.jsonArray(ids.idfvs), Self.jsonArray(ids.idfas),
                ]
            ).filter { sweep.matchesPending(state: $0["state"]) }.map { $0["record_id"] as String }
            try db.execute(
                sql: "DELETE FROM pending WHERE record_id IN (SELECT value FROM json_each(?))",
                arguments: [Self.jsonArray(waiting)])
            let recordIDs = Self.jsonArray(sweep.matched.map(\.recordID) + waiting)
            for statement in [
                "DELETE FROM outbox WHERE record_id IN (SELECT value FROM json_each(?))",
                "DELETE FROM dead_letters WHERE record_id IN (SELECT value FROM json_each(?))",
                """
                DELETE FROM sdk_transactions WHERE user_id IN (
                    SELECT id FROM sdk_users WHERE attribution_record_id IN (SELECT value FROM json_each(?)))
                """,
                "DELETE FROM sdk_users WHERE attribution_record_id IN (SELECT value FROM json_each(?))",
            ] {
                try db.execute(sql: statement, arguments: [recordIDs])
            }
            // With no sink to ask, the request is done with the store's part.
            let done = sinks.isEmpty
            if !done {
                try db.execute(
                    sql: """
                        INSERT INTO records (record_id, dedupe_key, provider, app_id, received_at, body)
                        VALUES (?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        carrier.recordID, carrier.dedupeKey, carrier.provider, carrier.appID, at,
                        carrier.encoded().text,
                    ])
            }
            for sink in sinks {
                try db.execute(
                    sql: """
                        INSERT INTO outbox (sink, record_id, attempts, next_attempt_at, created_at) VALUES (?, ?, 0, ?, ?)
                        """, arguments: [sink, requestID, at, at])
            }
            try db.execute(
                sql: """
                    INSERT INTO forget_requests (request_id, app_id, user_sha256, requested_at, records_forgotten,
                        sinks, identifiers, completed_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    requestID, subject.appID, userDigest, at, sweep.matched.count, Self.jsonArray(sinks),
                    done ? nil : String(decoding: try JSONEncoder().encode(sweep.identifiers), as: UTF8.self),
                    done ? at : nil,
                ])
            return try Self.forgetStatus(requestID, db)!
        }
    }

    public func forgetRequest(id: String, sink: String) async throws -> ForgetRequest? {
        try await pool.read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT app_id, requested_at, identifiers, (
                            SELECT reason FROM forget_answers a
                            WHERE a.request_id = r.request_id AND a.sink = ?2 AND a.state = 'pending') AS progress
                        FROM forget_requests r WHERE request_id = ?1
                        """,
                    arguments: [id, sink]),
                let identifiers = row["identifiers"] as String?
            else { return nil }
            return ForgetRequest(
                requestID: id, appID: row["app_id"], requestedAt: Date(timeIntervalSince1970: row["requested_at"]),
                identifiers: try JSONDecoder().decode(ForgottenIdentifiers.self, from: Data(identifiers.utf8)),
                progress: row["progress"])
        }
    }

    public func forgetAnswered(requestID: String, sink: String, answer: ForgetAnswer, now: Date) async throws {
        let (state, reason) = answer.stored
        try await pool.write { db in
            guard
                let sinks = try String.fetchOne(
                    db, sql: "SELECT sinks FROM forget_requests WHERE request_id = ?", arguments: [requestID])
            else { return }
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO forget_answers (request_id, sink, state, reason, answered_at)
                    VALUES (?, ?, ?, ?, ?)
                    """, arguments: [requestID, sink, state, reason, now.timeIntervalSince1970])
            // Still at work: the row stays, for the worker to schedule the next look.
            guard state != "pending" else { return }
            try db.execute(sql: "DELETE FROM outbox WHERE sink = ? AND record_id = ?", arguments: [sink, requestID])
            let waiting =
                try Int.fetchOne(
                    db,
                    sql: """
                        SELECT COUNT(*) FROM json_each(?) s
                        WHERE NOT EXISTS (
                        SELECT 1 FROM forget_answers a WHERE a.request_id = ? AND a.sink = s.value AND a.state <> 'pending')
                        """, arguments: [sinks, requestID]) ?? 0
            guard waiting == 0 else { return }
            try db.execute(sql: "PRAGMA secure_delete = ON")
            defer { try? db.execute(sql: "PRAGMA secure_delete = OFF") }
            try db.execute(
                sql: "UPDATE forget_requests SET completed_at = ?, identifiers = NULL WHERE request_id = ?",
                arguments: [now.timeIntervalSince1970, requestID])
            for table in ["outbox", "dead_letters", "records"] {
                try db.execute(sql: "DELETE FROM \(table) WHERE record_id = ?", arguments: [requestID])
            }
        }
    }

    public func forgetStatus(id: String) async throws -> ForgetStatus? {
        try await pool.read { db in try Self.forgetStatus(id, db) }
    }

    static func forgetStatus(_ requestID: String, _ db: Database) throws -> ForgetStatus? {
        guard
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT app_id, user_sha256, requested_at, completed_at, records_forgotten, sinks
                    FROM forget_requests WHERE request_id = ?
                    """, arguments: [requestID])
        else { return nil }
        let sinks = try JSONDecoder().decode([String].self, from: Data((row["sinks"] as String).utf8))
        let statuses = try sinks.map { sink in
            let answer = try Row.fetchOne(
                db, sql: "SELECT state, reason FROM forget_answers WHERE request_id = ? AND sink = ?",
                arguments: [requestID, sink])
            let queued = try Row.fetchOne(
                db, sql: "SELECT last_error FROM outbox WHERE sink = ? AND record_id = ?", arguments: [sink, requestID])
            let deadLetter = try String.fetchOne(
                db, sql: "SELECT error FROM dead_letters WHERE sink = ? AND record_id = ?",
                arguments: [sink, requestID])
            return ForgetSinkStatus.from(
                sink: sink, answer: answer.map { ($0["state"], $0["reason"]) }, deadLetterError: deadLetter,
                queued: queued != nil, lastError: queued?["last_error"])
        }
        let completed: Double? = row["completed_at"]
        return ForgetStatus(
            requestID: requestID, appID: row["app_id"], userDigest: row["user_sha256"],
            requestedAt: Date(timeIntervalSince1970: row["requested_at"]),
            completedAt: completed.map(Date.init(timeIntervalSince1970:)), recordsForgotten: row["records_forgotten"],
            sinks: statuses)
    }
}
