import Foundation
import GRDB
import GatewayCore
import Testing

@testable import GatewayStorage

/// `import` gives the writer a cache for its commits' pages and lets the log grow with the
/// store before it checkpoints, then leaves every page it wrote in the database file with
/// SQLite's settings back.
@Suite struct SQLiteBulkImportTests {
    /// The writer's checkpoint threshold (pages) and page cache (negative: KiB).
    func writerSettings(_ store: SQLiteStore) async throws -> [Int?] {
        try await store.pool.writeWithoutTransaction { db in
            [try Int.fetchOne(db, sql: "PRAGMA wal_autocheckpoint"), try Int.fetchOne(db, sql: "PRAGMA cache_size")]
        }
    }

    /// What docs/cli.md promises an operator about the disk an import needs beside
    /// the store: a log of a quarter of the store, never under 64 MB nor over 1 GB.
    @Test func theImportsLogGrowsToAQuarterOfTheStoreBetween64MBAnd1GB() {
        let pageBytes = 4_096
        func logBytes(storeBytes: Int) -> Int {
            SQLiteStore.bulkImportCheckpointPages(storePages: storeBytes / pageBytes) * pageBytes
        }
        #expect(logBytes(storeBytes: 0) == 64 << 20)
        #expect(logBytes(storeBytes: 100 << 20) == 64 << 20)
        #expect(logBytes(storeBytes: 2 << 30) == 512 << 20)
        #expect(logBytes(storeBytes: 12 << 30) == 1 << 30)
    }

    @Test func theLogReachesTheFileWhenTheImportEnds() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("import-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("gateway.sqlite").path
        let store = try SQLiteStore(path: path, durability: .normal)

        #expect(try await writerSettings(store) == [1_000, -2_000])
        try await store.prepareWriterForImport()
        #expect(try await writerSettings(store) == [16_384, -32_768])
        let records = (0..<300).map { index in
            RoutedRecord(
                record: AttributionRecord(
                    provider: "iad", kind: .install, dedupeKey: "key-\(index)",
                    receivedAt: Date(timeIntervalSince1970: 1_700_000_000)),
                sinks: [])
        }
        _ = try await store.ingest(records)
        try await store.checkpointAfterImport()
        #expect(try await writerSettings(store) == [1_000, -2_000])

        // The log is cut to nothing, and the file alone, without it, has the records.
        let log = (try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
        #expect(log == 0)
        let copy = folder.appendingPathComponent("copy.sqlite").path
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        let reader = try DatabaseQueue(path: copy)
        #expect(try await reader.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM records") } == 300)
    }
}
