import Foundation
import GatewayCore
import GatewayPostgres
import Logging
import PostgresNIO

/// Keyword names in the gateway's PostgreSQL database, shared by its replicas: a name one
/// replica fetched is not asked of Apple again by another.
final class PostgresKeywordNames: KeywordNameStore {
    let database: EnricherPostgres
    var logger: Logger { database.logger }
    /// Names are a cache: a database that does not answer costs a record its names, never
    /// holds it longer than half the store's wait.
    var timeout: Duration { database.url.timeout / 2 }

    init(url: PostgresURL, logger: Logger) async throws {
        database = try await EnricherPostgres(
            url: url, logger: logger, lock: 0x4154_5452_4757_0003,
            schema: [
                """
                CREATE TABLE IF NOT EXISTS apple_ads_names (
                    key text PRIMARY KEY, name text, match_type text,
                    fetched_at double precision NOT NULL)
                """,
                """
                CREATE TABLE IF NOT EXISTS apple_ads_names_owed (
                    record_id text PRIMARY KEY, since double precision NOT NULL)
                """,
            ])
    }

    func entries(_ keys: [String]) async throws -> [String: KeywordNameEntry] {
        guard !keys.isEmpty else { return [:] }
        return try await run { [logger] client in
            var found: [String: KeywordNameEntry] = [:]
            let rows = try await client.query(
                "SELECT key, name, match_type, fetched_at FROM apple_ads_names WHERE key = ANY(\(keys)::text[])",
                logger: logger)
            for try await (key, name, matchType, fetchedAt) in rows.decode((String, String?, String?, Double).self) {
                found[key] = KeywordNameEntry(
                    name: name, matchType: matchType, fetchedAt: Date(timeIntervalSince1970: fetchedAt))
            }
            return found
        }
    }

    func store(_ entries: [String: KeywordNameEntry]) async throws {
        try await database.run(within: timeout) { [database] _ in
            try await database.insert(
                Array(entries), columns: 4, lastCast: "double precision",
                statement: { values in
                    """
                    INSERT INTO apple_ads_names (key, name, match_type, fetched_at)
                    VALUES \(values)
                    ON CONFLICT (key) DO UPDATE SET name = EXCLUDED.name,
                        match_type = EXCLUDED.match_type, fetched_at = EXCLUDED.fetched_at
                    """
                },
                bind: { bindings, row in
                    let (key, entry) = row
                    bindings.append(key)
                    if let name = entry.name { bindings.append(name) } else { bindings.appendNull() }
                    if let match = entry.matchType { bindings.append(match) } else { bindings.appendNull() }
                    bindings.append(entry.fetchedAt.timeIntervalSince1970)
                })
        }
    }

    func rememberOwed(_ recordIDs: [String], now: Date) async throws {
        guard !recordIDs.isEmpty else { return }
        let since = now.timeIntervalSince1970
        try await run { [logger] client in
            _ = try await client.query(
                """
                INSERT INTO apple_ads_names_owed (record_id, since)
                SELECT id, \(since) FROM unnest(\(recordIDs)::text[]) AS id ON CONFLICT (record_id) DO NOTHING
                """, logger: logger)
        }
    }

    func owed(since: Date) async throws -> [String] {
        try await letGoOwed(before: since)
        return try await run { [logger] client in
            var owed: [String] = []
            let rows = try await client.query(
                "SELECT record_id FROM apple_ads_names_owed ORDER BY since, record_id", logger: logger)
            for try await id in rows.decode(String.self) { owed.append(id) }
            return owed
        }
    }

    func letGoOwed(before: Date) async throws {
        let limit = before.timeIntervalSince1970
        try await run { [logger] client in
            _ = try await client.query("DELETE FROM apple_ads_names_owed WHERE since < \(limit)", logger: logger)
        }
    }

    func forgetOwed(_ recordIDs: [String]) async throws {
        guard !recordIDs.isEmpty else { return }
        try await run { [logger] client in
            _ = try await client.query(
                "DELETE FROM apple_ads_names_owed WHERE record_id = ANY(\(recordIDs)::text[])", logger: logger)
        }
    }

    private func run<T: Sendable>(_ work: @escaping @Sendable (PostgresClient) async throws -> T) async throws -> T {
        try await database.run(within: timeout, work)
    }
}
