import Foundation
import GRDB
import GatewayCore
import Testing

import GatewayStorage

/// `import` gives the writer a cache for its commits' pages and lets the log grow before
/// it checkpoints, then leaves every page it wrote in the database file with SQLite's
/// settings back.
@Suite struct SQLiteBulkImportTests {
    /// The writer's checkpoint threshold (pages) and page cache (negative: KiB).
    func writerSettings(_ store: SQLiteStore) async throws -> [Int?] {
        try await store.pool.writeWithoutTransaction { db in
            [try Int.fetchOne(db, sql: "PRAGMA wal_autocheckpoint"), try Int.fetchOne(db, sql: "PRAGMA cache_size")]
        }
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
