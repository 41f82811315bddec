import Foundation
import GRDB
import GatewayCore
import Logging
import Testing

import GatewayStorage

/// The write-ahead log is copied into the database file by the checkpointer, not by the
/// commits of requests, and the writer gets SQLite's own threshold back when it stops.
@Suite struct WALCheckpointerTests {
    func record(_ index: Int) -> RoutedRecord {
        var record = AttributionRecord(
            provider: "iad", kind: .install, dedupeKey: "key-\(index)",
            receivedAt: Date(timeIntervalSince1970: 1_700_000_000))
        // About 2 KB stored, like an iAd record with its payload: random bytes, since the
        // store compresses raw payloads.
        let noise = Data((0..<2_000).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        record.raw = .object(["padding": .string(noise), "index": .integer(Int64(index))])
        return RoutedRecord(record: record, sinks: ["local"])
    }

    func writerThreshold(_ store: SQLiteStore) async throws -> Int? {
        try await store.pool.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA wal_autocheckpoint") }
    }

    func databaseFileSize(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
    }

    /// Polls until `condition` holds or 30 s pass: a deadline, not a speed expectation.
    func eventually(_ condition: () async throws -> Bool) async throws -> Bool {
        for _ in 0..<600 {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return try await condition()
    }

    @Test func committedPagesReachTheDatabaseFileWithoutTheWriterCheckpointing() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("wal-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("gateway.sqlite").path
        let store = try SQLiteStore(path: path, durability: .full)
        let before = try databaseFileSize(path)

        let checkpointer = WALCheckpointer(store: store, interval: .milliseconds(10), logger: Logger(label: "test"))
        let running = Task { try await checkpointer.run() }
        #expect(try await eventually { try await writerThreshold(store) == 4_096 })

        // About 1.5 MB: far below the writer's own threshold (16 MB, or SQLite's 4 MB),
        // so only the checkpointer can have moved these pages into the database file.
        for start in stride(from: 0, to: 700, by: 100) {
            _ = try await store.ingest((start..<start + 100).map(record))
        }
        #expect(try await eventually { try databaseFileSize(path) > before + 1_000_000 })

        running.cancel()
        try await running.value
        #expect(try await writerThreshold(store) == 1_000)
        #expect(try await store.outboxStats()["local"]?.depth == 700)
        // Stopped, it leaves the store in its one file: the log is empty.
        #expect(try databaseFileSize(path + "-wal") == 0)
    }
}
