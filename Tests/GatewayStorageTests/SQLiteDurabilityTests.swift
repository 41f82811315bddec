import Foundation
import GRDB
import Testing

import GatewayStorage

/// `storage.sqlite.durability` must reach the connection that commits: with `full`, SQLite
/// syncs the write-ahead log on every commit, so an acknowledged record survives a power
/// cut. (GRDB sets `synchronous = NORMAL` on a pool's writer when it turns WAL on, after
/// any setting made while the connection was being prepared.)
@Suite struct SQLiteDurabilityTests {
    /// The writer's `PRAGMA synchronous`: 1 is NORMAL, 2 is FULL.
    func writerSynchronous(_ durability: SQLiteDatabase.Durability) async throws -> Int? {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("durability-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try SQLiteStore(path: folder.appendingPathComponent("gateway.sqlite").path, durability: durability)
        return try await store.pool.writeWithoutTransaction { db in
            try Int.fetchOne(db, sql: "PRAGMA synchronous")
        }
    }

    @Test func fullSyncsEveryCommitOnTheWriter() async throws {
        #expect(try await writerSynchronous(.full) == 2)
    }

    @Test func normalSyncsAtCheckpointsOnly() async throws {
        #expect(try await writerSynchronous(.normal) == 1)
    }

    /// A sink or cache on the same file may open the shared pool before the store does;
    /// the store's setting must still be the one its commits get, in either direction.
    @Test func theStoresSettingHoldsWhenAnotherOpenedTheFileFirst() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("durability-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("gateway.sqlite").path
        let opener = try SQLiteDatabase.pool(path: path)
        for durability in [SQLiteDatabase.Durability.normal, .full] {
            let store = try SQLiteStore(path: path, durability: durability)
            #expect(store.pool === opener)
            let actual = try await store.pool.writeWithoutTransaction { db in
                try Int.fetchOne(db, sql: "PRAGMA synchronous")
            }
            #expect(actual == (durability == .full ? 2 : 1))
            // A later opener without a setting of its own leaves it.
            _ = try SQLiteDatabase.pool(path: path)
            #expect(
                try await opener.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
                    == actual)
        }
    }
}
