import Foundation
import GatewayCore
import PostgresNIO

/// Users and transactions of the ASA Attribution SDK's backend contract.
extension PostgresStore {
    /// A random id below 2^53 that no one can guess (see `SQLiteStore.createSDKUser`).
    public func createSDKUser(now: Date) async throws -> SDKUser {
        while true {
            let id = Int64.random(in: 1...(1 << 53 - 1))
            let created = try await Self.firstInt(
                query(
                    """
                    WITH created AS (
                        INSERT INTO sdk_users (id, created_at) VALUES (\(id), \(Self.seconds(now)))
                        ON CONFLICT DO NOTHING RETURNING 1)
                    SELECT count(*) FROM created
                    """, logger: logger))
            if created == 1 { return SDKUser(id: id, attributionRecordID: nil, createdAt: now) }
        }
    }

    public func sdkUser(id: Int64) async throws -> SDKUser? {
        let rows = try await query(
            "SELECT id, created_at, attribution_record_id FROM sdk_users WHERE id = \(id)", logger: logger)
        for try await (id, createdAt, recordID) in rows.decode((Int64, Double, String?).self) {
            return SDKUser(id: id, attributionRecordID: recordID, createdAt: Self.date(createdAt))
        }
        return nil
    }

    public func sdkPendingPurchaseIDs(userID: Int64, keyPrefix: String) async throws -> [String] {
        try await strings(
            query(
                """
                SELECT p.record_id FROM sdk_transactions t
                JOIN records p ON md5(p.dedupe_key)::uuid = md5(\(keyPrefix) || t.transaction_id)::uuid
                    AND p.dedupe_key = \(keyPrefix) || t.transaction_id
                WHERE t.user_id = \(userID) AND \(unescaped: BodyField.text("resolution", of: "p.body")) = 'pending'
                """, logger: logger))
    }

    public func sdkAnsweredUsersWithPendingPurchases(keyPrefix: String) async throws -> [String] {
        try await strings(
            query(
                """
                SELECT DISTINCT u.attribution_record_id FROM sdk_transactions t
                JOIN sdk_users u ON u.id = t.user_id
                JOIN records p ON md5(p.dedupe_key)::uuid = md5(\(keyPrefix) || t.transaction_id)::uuid
                    AND p.dedupe_key = \(keyPrefix) || t.transaction_id
                WHERE \(unescaped: BodyField.text("resolution", of: "p.body")) = 'pending'
                AND EXISTS (SELECT 1 FROM gateway_records(ARRAY[u.attribution_record_id]))
                """, logger: logger))
    }

    public func setSDKUserAttribution(userID: Int64, recordID: String) async throws {
        _ = try await query(
            "UPDATE sdk_users SET attribution_record_id = \(recordID) WHERE id = \(userID)", logger: logger)
    }

    /// The transaction's primary key decides between two replicas claiming it at once.
    public func associateTransaction(userID: Int64, transactionID: String, now: Date) async throws
        -> TransactionAssociation
    {
        let inserted = try await Self.firstInt(
            query(
                """
                WITH added AS (
                    INSERT INTO sdk_transactions (transaction_id, user_id, created_at)
                    VALUES (\(transactionID), \(userID), \(Self.seconds(now)))
                    ON CONFLICT DO NOTHING RETURNING 1)
                SELECT count(*) FROM added
                """, logger: logger))
        if inserted ?? 0 > 0 { return .associated }
        let owner = try await Self.firstInt(
            query("SELECT user_id FROM sdk_transactions WHERE transaction_id = \(transactionID)", logger: logger)
        )
        return owner == userID ? .alreadyAssociated : .belongsTo(userID: owner ?? 0)
    }

    private func strings(_ rows: PostgresRowSequence) async throws -> [String] {
        var values: [String] = []
        for try await value in rows.decode(String.self) { values.append(value) }
        return values
    }
}
