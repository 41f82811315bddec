import Foundation
import GRDB
import GatewayCore

/// Users and transactions of the ASA Attribution SDK's backend contract.
extension SQLiteStore {
    public func createSDKUser(now: Date) async throws -> SDKUser {
        try await pool.write { db in
            try db.execute(sql: "INSERT INTO sdk_users (created_at) VALUES (?)", arguments: [now.timeIntervalSince1970])
            return SDKUser(id: db.lastInsertedRowID, attributionRecordID: nil, createdAt: now)
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

    public func setSDKUserAttribution(userID: Int64, recordID: String) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE sdk_users SET attribution_record_id = ? WHERE id = ?", arguments: [recordID, userID])
        }
    }

    public func associateTransaction(userID: Int64, transactionID: String, now: Date) async throws
        -> TransactionAssociation
    {
        try await pool.write { db in
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
