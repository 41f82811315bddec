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
}
