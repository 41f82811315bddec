import Foundation
import GatewayStorage
import GRDB
import Testing

/// `StoreBackup` copies one moment of a store that another connection keeps writing.
@Suite struct StoreBackupTests {
    @Test func theCopyIsTheMomentItBeganAndCommitsBetweenItsStepsNeitherRestartNorEnterIt() async throws {
        let f = try DeliveryTests.Fixture()
        defer { try? FileManager.default.removeItem(atPath: f.path) }
        let records = try await f.ingest(200)
        // Another connection to the file, as a running gateway is to `attribution-gateway backup`.
        let other = try DatabaseQueue(path: f.path)
        let target = f.path + ".backup"
        defer { try? FileManager.default.removeItem(atPath: target) }

        var steps: [Int] = []
        var total = 0
        let summary = try StoreBackup.copy(f.store, to: target, pagesPerStep: 1) { copied, pages in
            steps.append(copied)
            total = pages
            // A commit that changes pages between steps: restarting would copy it.
            if steps.count <= 5 {
                try? other.write { db in
                    try db.execute(sql: "CREATE TABLE IF NOT EXISTS meanwhile (x BLOB)")
                    try db.execute(sql: "INSERT INTO meanwhile VALUES (randomblob(20000))")
                }
            }
        }
        // One step per page, in order, none repeated.
        #expect(total > 5)
        #expect(steps == Array(1...total))
        let meanwhile = try await other.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM meanwhile") }
        #expect(meanwhile == 5)

        let copy = try DatabaseQueue(path: target)
        let (hasMeanwhile, ids) = try await copy.read { db in
            (try db.tableExists("meanwhile"), Set(try String.fetchAll(db, sql: "SELECT record_id FROM records")))
        }
        #expect(!hasMeanwhile)
        #expect(ids == Set(records.map(\.recordID)))
        #expect(summary.records == records.count)
        #expect(summary.bytes == total * 4096)
    }

    @Test func aTargetThatExistsOrAFolderThatDoesNotIsRefusedAndLeftAlone() async throws {
        let f = try DeliveryTests.Fixture()
        defer { try? FileManager.default.removeItem(atPath: f.path) }
        try await f.ingest(3)
        let existing = f.path + ".old"
        try Data("an older backup".utf8).write(to: URL(fileURLWithPath: existing))
        defer { try? FileManager.default.removeItem(atPath: existing) }
        for (target, reason) in [(existing, "exists"), ("/nonexistent-\(UUID())/copy.sqlite", "is not a folder")] {
            #expect {
                try StoreBackup.copy(f.store, to: target)
            } throws: { error in
                "\(error)".contains(reason)
            }
        }
        #expect(try String(contentsOfFile: existing, encoding: .utf8) == "an older backup")
        #expect(!FileManager.default.fileExists(atPath: existing + ".partial"))
    }
}
