import Foundation
import GatewayCompactRaw
import GatewayCore
import PostgresNIO

extension PostgresStore {
    public func forget(_ subject: ForgetSubject, requestID: String, userDigest: String, sinks: [String], now: Date)
        async throws -> ForgetStatus
    {
        let carrier = AttributionRecord.forgetCarrier(requestID: requestID, appID: subject.appID, at: now)
        let carrierBody = carrier.encoded(codedKeys: true).text
        let at = Self.seconds(now)
        try await transaction { [logger] connection in
            var sweep = ForgetSweep(subject)
            for _ in 0..<ForgetSweep.maxRounds {
                let ids = sweep.searchIDs
                // Every record of the app is read: the ids live in the bodies, with no index.
                // Locked, so that a late version written meanwhile waits for the reduction.
                let rows = try await connection.query(
                    """
                    SELECT \(unescaped: StoredColumns.selectList()) FROM records WHERE app_id = \(subject.appID) AND provider <> 'forget' AND (
                        \(unescaped: BodyField.text("app_user_id")) = ANY(\(ids.appUserIDs)::text[])
                        OR \(unescaped: BodyField.text("idfv")) = ANY(\(ids.idfvs)::text[])
                        OR \(unescaped: BodyField.text("idfa")) = ANY(\(ids.idfas)::text[]))
                    FOR UPDATE
                    """, logger: logger)
                var found = false
                for try await row in rows {
                    // A payload that no longer reads (its body was changed by hand) is cleared
                    // by the forget anyway: the user's ids in the body still go.
                    let cells = row.makeRandomAccess()
                    guard let record = (try? Self.record(of: cells)) ?? (try? Self.record(of: cells, withRaw: false))
                    else { continue }
                    found = sweep.add(record) || found
                }
                if !found { break }
            }
            let matchedIDs = sweep.matched.map(\.recordID)
            for record in sweep.reduced() {
                let (body, raw, _) = record.encoded(codedKeys: true).stored
                _ = try await connection.query(
                    """
                    UPDATE records SET body = \(body), raw = \(raw.map { Data($0) }), dedupe_key = \(record.dedupeKey),
                        received_at = \(Self.seconds(record.receivedAt))
                    WHERE seq = (SELECT seq FROM gateway_records(ARRAY[\(record.recordID)::text]))
                    """, logger: logger)
            }
            // Tokens of the user's still waiting for Apple would become records of theirs; the
            // ASA SDK user a token belongs to goes with it.
            let ids = sweep.searchIDs
            let candidates = try await connection.query(
                """
                SELECT record_id, state FROM pending WHERE app_id = \(subject.appID) AND (
                    gateway_json(convert_from(state, 'UTF8')) ->> 'appUserID' = ANY(\(ids.appUserIDs)::text[])
                    OR gateway_json(convert_from(state, 'UTF8')) ->> 'idfv' = ANY(\(ids.idfvs)::text[])
                    OR gateway_json(convert_from(state, 'UTF8')) ->> 'idfa' = ANY(\(ids.idfas)::text[]))
                FOR UPDATE
                """, logger: logger)
            var waiting: [String] = []
            for try await (recordID, state) in candidates.decode((String, ByteBuffer).self)
            where sweep.matchesPending(state: Data(buffer: state)) {
                waiting.append(recordID)
            }
            _ = try await connection.query(
                "DELETE FROM pending WHERE record_id = ANY(\(waiting)::text[])", logger: logger)
            let recordIDs = matchedIDs + waiting
            _ = try await connection.query(
                "DELETE FROM outbox WHERE record_seq IN (SELECT seq FROM gateway_records(\(matchedIDs)::text[]))",
                logger: logger)
            _ = try await connection.query(
                "DELETE FROM dead_letters WHERE record_seq IN (SELECT seq FROM gateway_records(\(matchedIDs)::text[]))",
                logger: logger)
            _ = try await connection.query(
                """
                DELETE FROM sdk_transactions WHERE user_id IN (
                    SELECT id FROM sdk_users WHERE attribution_record_id = ANY(\(recordIDs)::text[]))
                """, logger: logger)
            _ = try await connection.query(
                "DELETE FROM sdk_users WHERE attribution_record_id = ANY(\(recordIDs)::text[])", logger: logger)
            // With no sink to ask, the request is done with the store's part.
            let done = sinks.isEmpty
            if !done {
                _ = try await connection.query(
                    """
                    WITH carrier AS (
                        INSERT INTO records (record_id, dedupe_key, provider, app_id, received_at, body)
                        VALUES (\(carrier.recordID), \(carrier.dedupeKey), \(carrier.provider), \(carrier.appID),
                            \(at), \(carrierBody))
                        RETURNING seq)
                    INSERT INTO outbox (sink, record_seq, attempts, next_attempt_at, created_at)
                    SELECT s, carrier.seq, 0, \(at), \(at) FROM carrier, unnest(\(sinks)::text[]) s
                    """, logger: logger)
            }
            let identifiers =
                done ? nil : String(decoding: try JSONEncoder().encode(sweep.identifiers), as: UTF8.self)
            let completedAt = done ? at : nil
            _ = try await connection.query(
                """
                INSERT INTO forget_requests (request_id, app_id, user_sha256, requested_at, records_forgotten, sinks,
                    identifiers, completed_at)
                VALUES (\(requestID), \(subject.appID), \(userDigest), \(at), \(Int64(sweep.matched.count)),
                    \(sinks)::text[], \(identifiers), \(completedAt))
                """, logger: logger)
        }
        guard let status = try await forgetStatus(id: requestID) else {
            throw StoreNotReady(reason: "the forget request was not found after it was stored")
        }
        return status
    }

    public func forgetRequest(id: String, sink: String) async throws -> ForgetRequest? {
        let rows = try await query(
            """
            SELECT app_id, requested_at, identifiers, (
                SELECT reason FROM forget_answers a
                WHERE a.request_id = r.request_id AND a.sink = \(sink) AND a.state = 'pending')
            FROM forget_requests r WHERE request_id = \(id) AND identifiers IS NOT NULL
            """, logger: logger)
        for try await (appID, requestedAt, identifiers, progress) in rows.decode((String, Double, String, String?).self)
        {
            return ForgetRequest(
                requestID: id, appID: appID, requestedAt: Self.date(requestedAt),
                identifiers: try JSONDecoder().decode(ForgottenIdentifiers.self, from: Data(identifiers.utf8)),
                progress: progress)
        }
        return nil
    }

    public func forgetAnswered(requestID: String, sink: String, answer: ForgetAnswer, now: Date) async throws {
        let (state, reason) = answer.stored
        let at = Self.seconds(now)
        try await transaction { [logger] connection in
            // Answers of one request come one at a time, so that the last one sees all the others.
            let sinks = try await connection.query(
                "SELECT sinks FROM forget_requests WHERE request_id = \(requestID) FOR UPDATE", logger: logger)
            var named: [String]?
            for try await list in sinks.decode([String].self) { named = list }
            guard let named else { return }
            _ = try await connection.query(
                """
                INSERT INTO forget_answers (request_id, sink, state, reason, answered_at)
                VALUES (\(requestID), \(sink), \(state), \(reason), \(at))
                ON CONFLICT (request_id, sink) DO UPDATE SET state = EXCLUDED.state, reason = EXCLUDED.reason,
                    answered_at = EXCLUDED.answered_at
                """, logger: logger)
            // Still at work: the row stays, for the worker to schedule the next look.
            guard state != "pending" else { return }
            _ = try await connection.query(
                """
                DELETE FROM outbox
                WHERE sink = \(sink) AND record_seq = (SELECT seq FROM gateway_records(ARRAY[\(requestID)::text]))
                """, logger: logger)
            let answered = try await Self.firstInt(
                connection.query(
                    """
                    SELECT count(*) FROM forget_answers
                    WHERE request_id = \(requestID) AND sink = ANY(\(named)::text[]) AND state <> 'pending'
                    """, logger: logger))
            guard Int(answered ?? 0) == Set(named).count else { return }
            _ = try await connection.query(
                """
                UPDATE forget_requests SET completed_at = \(at), identifiers = NULL
                WHERE request_id = \(requestID) AND completed_at IS NULL
                """, logger: logger)
            for table in ["outbox", "dead_letters"] {
                _ = try await connection.query(
                    """
                    DELETE FROM \(unescaped: table)
                    WHERE record_seq IN (SELECT seq FROM gateway_records(ARRAY[\(requestID)::text]))
                    """, logger: logger)
            }
            _ = try await connection.query(
                "DELETE FROM records WHERE seq IN (SELECT seq FROM gateway_records(ARRAY[\(requestID)::text]))",
                logger: logger)
        }
    }

    public func forgetStatus(id: String) async throws -> ForgetStatus? {
        let rows = try await query(
            """
            SELECT app_id, user_sha256, requested_at, completed_at, records_forgotten, sinks
            FROM forget_requests WHERE request_id = \(id)
            """, logger: logger)
        var found: (String, String, Double, Double?, Int64, [String])?
        for try await row in rows.decode((String, String, Double, Double?, Int64, [String]).self) { found = row }
        guard let (appID, digest, requestedAt, completedAt, forgotten, sinks) = found else { return nil }
        let sinkRows = try await query(
            """
            SELECT s, a.state, a.reason, d.error, o.id IS NOT NULL, o.last_error
            FROM unnest(\(sinks)::text[]) s
            LEFT JOIN forget_answers a ON a.request_id = \(id) AND a.sink = s
            LEFT JOIN gateway_records(ARRAY[\(id)::text]) c ON true
            LEFT JOIN dead_letters d ON d.record_seq = c.seq AND d.sink = s
            LEFT JOIN outbox o ON o.record_seq = c.seq AND o.sink = s
            """, logger: logger)
        var byName: [String: ForgetSinkStatus] = [:]
        for try await (sink, state, reason, deadLetter, queued, lastError) in sinkRows.decode(
            (String, String?, String?, String?, Bool, String?).self)
        {
            byName[sink] = ForgetSinkStatus.from(
                sink: sink, answer: state.map { ($0, reason) }, deadLetterError: deadLetter, queued: queued,
                lastError: lastError)
        }
        return ForgetStatus(
            requestID: id, appID: appID, userDigest: digest, requestedAt: Self.date(requestedAt),
            completedAt: completedAt.map(Self.date), recordsForgotten: Int(forgotten),
            sinks: sinks.compactMap { byName[$0] })
    }
}
