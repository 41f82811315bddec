import Foundation
import GRDB
import GatewayCore

/// Users and transactions of the ASA Attribution SDK's backend contract.
extension SQLiteStore {
    /// A new user under an id no one can guess: the SDK's key ships in every copy of the
    /// app, so with ids counting up, anyone could read whether user N came from an ad, put
    /// their own token on N's pending attribution (and N's purchases on their campaign), or
    /// claim transactions for N. A random id below 2^53 (a JSON number every client reads
    /// exactly), from the system's secure generator.
    public func createSDKUser(now: Date) async throws -> SDKUser {
        try await acknowledgedWrite { db in
            while true {
                let id = Int64.random(in: 1...(1 << 53 - 1))
                try db.execute(
                    sql: "INSERT OR IGNORE INTO sdk_users (id, created_at) VALUES (?, ?)",
                    arguments: [id, now.timeIntervalSince1970])
                if db.changesCount == 1 { return SDKUser(id: id, attributionRecordID: nil, createdAt: now) }
            }
        }
    }

    public func sdkUser(id: Int64) async throws -> SDKUser? {
        try await pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT id, created_at, attribution_record_id FROM sdk_users WHERE id = ?", arguments: [id]
            ).map { row in
                SDKUser(
                    id: row["id"], attributionRecordID: row["attribution_record_id"],
                    createdAt: Date(timeIntervalSince1970: row["created_at"]))
            }
        }
    }

    /// One statement, by the transactions' index and the records' dedupe keys: called at
    /// each `associate-user`, whose key ships in every app, it must not read and decode
    /// every purchase of a user with thousands.
    public func sdkPendingPurchaseIDs(userID: Int64, keyPrefix: String) async throws -> [String] {
        try await pool.read { db in
            try String.fetchAll(
                db,
                sql: """
                    SELECT p.record_id FROM sdk_transactions t
                    JOIN records p ON p.dedupe_key = ? || t.transaction_id
                    WHERE t.user_id = ? AND json_extract(p.body, '$.resolution') = 'pending'
                    """,
                arguments: [keyPrefix, userID])
        }
    }

    /// Read once at start, so a scan of the transactions is affordable; a user's record
    /// is in `records` only once Apple has answered (until then it is in `pending`).
    public func sdkAnsweredUsersWithPendingPurchases(keyPrefix: String) async throws -> [String] {
        try await pool.read { db in
            try String.fetchAll(
                db,
                sql: """
                    SELECT DISTINCT u.attribution_record_id FROM sdk_transactions t
                    JOIN sdk_users u ON u.id = t.user_id
                    JOIN records p ON p.dedupe_key = ? || t.transaction_id
                    WHERE json_extract(p.body, '$.resolution') = 'pending'
                    AND EXISTS (SELECT 1 FROM records a WHERE a.record_id = u.attribution_record_id)
                    """,
                arguments: [keyPrefix])
        }
    }

    public func setSDKUserAttribution(userID: Int64, recordID: String) async throws {
        try await acknowledgedWrite { db in
            try db.execute(
                sql: "UPDATE sdk_users SET attribution_record_id = ? WHERE id = ?", arguments: [recordID, userID])
        }
    }

    public func associateTransaction(userID: Int64, transactionID: String, now: Date) async throws
        -> TransactionAssociation
    {
        try await acknowledgedWrite { db in
            if let owner = try Int64.fetchOne(
                db, sql: "SELECT user_id FROM sdk_transactions WHERE transaction_id = ?", arguments: [transactionID])
            {
                return owner == userID ? .alreadyAssociated : .belongsTo(userID: owner)
            }
            try db.execute(
                sql: "INSERT INTO sdk_transactions (transaction_id, user_id, created_at) VALUES (?, ?, ?)",
                arguments: [transactionID, userID, now.timeIntervalSince1970])
            return .associated
        }
    }
}

extension SQLiteStore {
    /// A write whose success a caller is told of (an SDK user's id, a claimed transaction):
    /// not acknowledged once the store's path names another file, or none, as the shared
    /// commits are not (``StoreFileIdentity``).
    func acknowledgedWrite<T: Sendable>(_ write: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let value = try await pool.write(write)
        try groupCommit.checkFile()
        return value
    }
}
