import Foundation
import GatewayCore
import GatewayStorage
import GRDB
import Testing

/// `StoreBackup` copies one moment of a store that another connection keeps writing.
@Suite struct StoreBackupTests {
    @Test func theCopyIsTheMomentItBeganAndCommitsBetweenItsStepsNeitherRestartNorEnterIt() async throws {
        let f = try DeliveryTests.Fixture()
        defer { try? FileManager.default.removeItem(atPath: f.path) }
        let records = try await f.ingest(200)
        // A forget request waits in the outboxes as a row of `records`: it is no record.
        _ = try await f.store.forget(
            ForgetSubject(appID: "1", appUserID: "nobody-here"), requestID: "req-b", userDigest: "d",
            sinks: ["memory"], now: f.clock.now)
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
        #expect(ids == Set(records.map(\.recordID) + ["req-b"]))
        #expect(summary.records == records.count)
        // The file's size: the pages copied, and those of the mark that tells the first start
        // on the copy it is a restore (its table, and the schema's page it may overflow into).
        let size = try FileManager.default.attributesOfItem(atPath: target)[.size] as? Int
        #expect(summary.bytes == size)
        #expect(summary.bytes > total * 4096)
        #expect(try await copy.read { db in try db.tableExists("restored_from_backup") })
        #expect(try await f.store.settleRestoredBackup(counting: ["memory"], built: ["memory"]) == nil)
    }

    @Test func aTargetThatWouldReplaceAnythingIsRefusedAndLeftAlone() async throws {
        let f = try DeliveryTests.Fixture()
        defer { try? FileManager.default.removeItem(atPath: f.path) }
        try await f.ingest(3)
        let folder = (f.path as NSString).deletingLastPathComponent
        let existing = f.path + ".old"
        try Data("an older backup".utf8).write(to: URL(fileURLWithPath: existing))
        let dangling = f.path + ".link"
        try FileManager.default.createSymbolicLink(atPath: dangling, withDestinationPath: folder + "/nowhere-\(UUID())")
        // A hot journal an earlier store left under the name: SQLite would roll it over the copy.
        let besideJournal = f.path + ".bak"
        try Data("pages of another store".utf8).write(to: URL(fileURLWithPath: besideJournal + "-journal"))
        defer {
            for path in [existing, dangling, besideJournal + "-journal"] {
                try? FileManager.default.removeItem(atPath: path)
            }
        }
        let cases = [
            (besideJournal, ".bak-journal exists"),
            (existing, "exists"), (dangling, "exists"), ("/nonexistent-\(UUID())/copy.sqlite", "is not a folder"),
            (folder + "/", "names a folder"),
            // Not there in WAL mode, yet the store's: made here, it would lock the live store.
            (f.path + "-journal", "the store's own -journal file"),
        ]
        for (target, reason) in cases {
            #expect(throws: StoreBackup.Refusal.self, "\(target)") {
                do {
                    _ = try StoreBackup.copy(f.store, to: target)
                } catch {
                    #expect("\(error)".contains(reason), "\(error)")
                    throw error
                }
            }
        }
        #expect(try String(contentsOfFile: existing, encoding: .utf8) == "an older backup")
        #expect(!FileManager.default.fileExists(atPath: f.path + "-journal"))
    }

    @Test func aFileThatAppearsUnderTheNameMeanwhileIsKeptAndTheCopyIsNot() async throws {
        let f = try DeliveryTests.Fixture()
        defer { try? FileManager.default.removeItem(atPath: f.path) }
        try await f.ingest(20)
        let target = f.path + ".backup"
        // Another run's leftovers under the old fixed name: not this run's to touch.
        let stale = target + ".partial"
        try FileManager.default.createDirectory(atPath: stale + "/sub", withIntermediateDirectories: true)
        defer { for path in [target, stale] { try? FileManager.default.removeItem(atPath: path) } }
        var appeared = false
        #expect(throws: StoreBackup.Refusal.self) {
            do {
                _ = try StoreBackup.copy(f.store, to: target, pagesPerStep: 1) { _, _ in
                    // Another backup finishing first under the same name.
                    if !appeared {
                        appeared = true
                        try? Data("the other backup".utf8).write(to: URL(fileURLWithPath: target))
                    }
                }
            } catch {
                #expect("\(error)".contains("appeared while the copy was made"), "\(error)")
                throw error
            }
        }
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "the other backup")
        #expect(FileManager.default.fileExists(atPath: stale + "/sub"))
        let folder = (target as NSString).deletingLastPathComponent
        let name = (target as NSString).lastPathComponent
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: folder).filter {
            $0.hasPrefix(name + ".partial-")
        }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    /// The live store holds what its backups hold (tokens waiting for Apple, user ids,
    /// raw payloads): a new one is its owner's alone too, its WAL files with it.
    @Test func aNewStoreIsItsOwnersAloneWhateverTheUmask() async throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("private-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: base) }
        let path = base + "/data/gateway.sqlite"
        let previous = umask(0o022)
        defer { umask(previous) }
        // As `serve` opens it: its lock claims the store file first.
        let lock = try ServeLock(storePath: path)
        defer { withExtendedLifetime(lock) {} }
        let store = try SQLiteStore(path: path, durability: .normal, upgrade: .whileServing(lock))
        try await store.ping()
        func mode(_ path: String) throws -> Int {
            try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
        }
        #expect(try mode(base + "/data") == 0o700)
        for file in [path, path + "-wal", path + "-shm", path + "-serve.lock"] {
            let bits = try mode(file)
            #expect(bits & 0o077 == 0, "\(file): \(String(bits, radix: 8))")
        }
    }

    @Test func theCopyIsItsOwnersAloneAndLandsWhereTheFolderResolves() async throws {
        let f = try DeliveryTests.Fixture()
        defer { try? FileManager.default.removeItem(atPath: f.path) }
        try await f.ingest(3)
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("backup-\(UUID())").path
        try FileManager.default.createDirectory(atPath: base + "/deep/inner", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: base + "/lnk", withDestinationPath: base + "/deep/inner")
        defer { try? FileManager.default.removeItem(atPath: base) }
        // `..` after a link goes up from where the link points, as the kernel resolves it.
        let summary = try StoreBackup.copy(f.store, to: base + "/lnk/../copy.sqlite")
        let landed = try #require(
            realpath(base + "/deep/copy.sqlite", nil).map { path in
                defer { free(path) }
                return String(cString: path)
            })
        #expect(summary.path == landed)
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: landed)[.posixPermissions] as? Int)
        #expect(mode & 0o077 == 0, "mode \(String(mode, radix: 8))")
    }
}
