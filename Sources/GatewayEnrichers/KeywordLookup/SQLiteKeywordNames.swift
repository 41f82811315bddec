import Foundation
import GRDB
import GatewayStorage

/// Keyword names in the gateway's SQLite file.
struct SQLiteKeywordNames: KeywordNameStore {
    let pool: DatabasePool

    init(path: String) throws {
        pool = try SQLiteDatabase.pool(path: path)
        try pool.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE IF NOT EXISTS apple_ads_names (
                        key TEXT PRIMARY KEY, name TEXT, match_type TEXT, fetched_at REAL NOT NULL);
                    CREATE TABLE IF NOT EXISTS apple_ads_names_owed (
                        record_id TEXT PRIMARY KEY, since REAL NOT NULL);
                    """)
        }
    }

    func entries(_ keys: [String]) async throws -> [String: KeywordNameEntry] {
        guard !keys.isEmpty else { return [:] }
        let list = SQLiteStore.jsonArray(keys)
        return try await pool.read { db in
            var found: [String: KeywordNameEntry] = [:]
            for row in try Row.fetchAll(
                db, sql: "SELECT * FROM apple_ads_names WHERE key IN (SELECT value FROM json_each(?))",
                arguments: [list])
            {
                found[row["key"]] = KeywordNameEntry(
                    name: row["name"], matchType: row["match_type"],
                    fetchedAt: Date(timeIntervalSince1970: row["fetched_at"]))
            }
            return found
        }
    }

    func store(_ entries: [String: KeywordNameEntry]) async throws {
        guard !entries.isEmpty else { return }
        try await pool.write { db in
            for (key, entry) in entries {
                try db.execute(
                    sql:
                        "INSERT OR REPLACE INTO apple_ads_names (key, name, match_type, fetched_at) VALUES (?, ?, ?, ?)",
                    arguments: [key, entry.name, entry.matchType, entry.fetchedAt.timeIntervalSince1970])
            }
        }
    }

    func rememberOwed(_ recordIDs: [String], now: Date) async throws {
        guard !recordIDs.isEmpty else { return }
        try await pool.write { db in
            for id in recordIDs {
                try db.execute(
                    sql: "INSERT OR IGNORE INTO apple_ads_names_owed (record_id, since) VALUES (?, ?)",
                    arguments: [id, now.timeIntervalSince1970])
            }
        }
    }

    func owed(since: Date) async throws -> [String] {
        try await letGoOwed(before: since)
        return try await pool.read { db in
            try String.fetchAll(db, sql: "SELECT record_id FROM apple_ads_names_owed ORDER BY since, record_id")
        }
    }

    func letGoOwed(before: Date) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "DELETE FROM apple_ads_names_owed WHERE since < ?", arguments: [before.timeIntervalSince1970])
        }
    }

    func forgetOwed(_ recordIDs: [String]) async throws {
        guard !recordIDs.isEmpty else { return }
        let list = SQLiteStore.jsonArray(recordIDs)
        try await pool.write { db in
            try db.execute(
                sql: "DELETE FROM apple_ads_names_owed WHERE record_id IN (SELECT value FROM json_each(?))",
                arguments: [list])
        }
    }
}
