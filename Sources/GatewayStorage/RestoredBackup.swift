import Foundation
import GatewayCore
import GRDB

/// The mark `backup` leaves in its copy, so that the first gateway to run on the copy
/// knows it is a restore: the copy's outboxes hold records that the original store may
/// have delivered after the backup, and a destination that counts each copy it is sent
/// (an S2S vendor: none deduplicates) must not be sent them again unasked.
public enum RestoredBackup {
    static let table = "restored_from_backup"

    /// Written into the copy only; the store it was taken from never has it.
    static func mark(_ db: Database, takenAt: Date) throws {
        try db.execute(sql: "CREATE TABLE IF NOT EXISTS \(table) (taken_at REAL NOT NULL)")
        try db.execute(sql: "INSERT INTO \(table) (taken_at) VALUES (?)", arguments: [takenAt.timeIntervalSince1970])
    }

    /// What settling a restored copy did.
    public struct Settled: Sendable, Equatable {
        /// When the backup was taken.
        public let takenAt: Date
        /// Records moved to the dead letters, by sink.
        public let deadLettered: [String: Int]
    }
}

extension SQLiteStore {
    /// When the store is a backup's copy not yet run on: moves to the dead letters, naming
    /// the backup, the outbox rows of `counting` (destinations that count a record sent
    /// twice twice) and of every sink not in `built` (what they are, this run cannot tell:
    /// a vendor left out of the first start's config would get its rows again at the next),
    /// and removes the mark, in one transaction. Nil for any other store.
    public func settleRestoredBackup(counting: [String], built: [String], now: Date = Date()) async throws
        -> RestoredBackup.Settled?
    {
        try await pool.write { db in
            guard try db.tableExists(RestoredBackup.table),
                let takenAt = try Double.fetchOne(db, sql: "SELECT MIN(taken_at) FROM \(RestoredBackup.table)")
            else { return nil }
            let taken = Date(timeIntervalSince1970: takenAt)
            let error =
                "restored from a backup taken at \(ISO8601.format(taken)): the destination may have "
                + "been sent it after the backup, and may count each copy; check it before dlq retry"
            var moved: [String: Int] = [:]
            let queued = try String.fetchAll(db, sql: "SELECT DISTINCT sink FROM outbox")
            for sink in queued where counting.contains(sink) || !built.contains(sink) {
                try db.execute(
                    sql: """
                        INSERT OR REPLACE INTO dead_letters (sink, record_id, attempts, error, failed_at)
                        SELECT sink, record_id, attempts, ?, ? FROM outbox WHERE sink = ?
                        """,
                    arguments: [error, now.timeIntervalSince1970, sink])
                try db.execute(sql: "DELETE FROM outbox WHERE sink = ?", arguments: [sink])
                if db.changesCount > 0 { moved[sink] = db.changesCount }
            }
            try db.execute(sql: "DROP TABLE \(RestoredBackup.table)")
            return RestoredBackup.Settled(takenAt: taken, deadLettered: moved)
        }
    }
}
