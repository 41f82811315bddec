import Foundation
import GatewayTestSupport
@testable import GatewayStorage
import GRDB
import Synchronization
import Testing

/// Opening a store upgrades its tables only where no older server can be running on them,
/// and refuses tables a newer binary made.
@Suite struct SchemaUpgradeTests {
    /// A store as the version before the last migration left it.
    func olderStore() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID()).sqlite").path
        let migrator = SQLiteStoreSchema.migrator
        let previous = migrator.migrations.dropLast().last!
        try migrator.migrate(try DatabaseQueue(path: path), upTo: previous)
        return path
    }

    func applied(_ path: String) throws -> Set<String> {
        try DatabaseQueue(path: path).read { try SQLiteStoreSchema.migrator.appliedIdentifiers($0) }
    }

    func remove(_ path: String) {
        for suffix in ["", "-wal", "-shm", "-serve.lock"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    /// A data upgrade reads every row it changes: minutes on a large store, in silence,
    /// looked hung to whoever watched the gateway start. It is said; a new store is not.
    @Test func anUpgradeIsAnnouncedAndANewStoreIsNot() throws {
        let path = try olderStore()
        defer { remove(path) }
        let told = Mutex<[String]>([])
        _ = try SQLiteStore(
            path: path, upgrade: .unlessServed, onWait: { message in told.withLock { $0.append(message) } })
        let last = SQLiteStoreSchema.migrator.migrations.last!
        #expect(
            told.withLock { $0 }.contains { $0.contains("upgrading the store's tables (\(last))") },
            "\(told.withLock { $0 })")

        let fresh = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID()).sqlite").path
        defer { remove(fresh) }
        let toldFresh = Mutex<[String]>([])
        _ = try SQLiteStore(
            path: fresh, upgrade: .unlessServed, onWait: { message in toldFresh.withLock { $0.append(message) } })
        #expect(toldFresh.withLock { $0 }.isEmpty)
    }

    @Test func anOlderStoreThatAServerHoldsIsNotUpgradedUnderIt() throws {
        let path = try olderStore()
        defer { remove(path) }
        let last = SQLiteStoreSchema.migrator.migrations.last!
        // An older release's server, serving: it took the lock and says so.
        let server = try ServeLock(storePath: path)
        server.announce(.serving)

        #expect {
            _ = try SQLiteStore(path: path, upgrade: .unlessServed)
        } throws: { error in
            let text = "\(error)"
            return text.contains("needs this version's upgrade (\(last))") && text.contains("pid \(getpid())")
                && text.contains("is serving it")
        }
        #expect(try !applied(path).contains(last))

        // A backup reads the file as it is, and the server itself upgrades it.
        _ = try SQLiteStore(path: path, upgrade: .never)
        #expect(try !applied(path).contains(last))
        _ = try SQLiteStore(path: path, upgrade: .whileServing(server))
        #expect(try applied(path).contains(last))
        withExtendedLifetime(server) {}
    }

    @Test func anOlderStoreNoServerHoldsIsUpgradedAndAServerCannotStartMeanwhile() throws {
        let path = try olderStore()
        defer { remove(path) }
        _ = try SQLiteStore(path: path, upgrade: .unlessServed)
        #expect(try applied(path) == Set(SQLiteStoreSchema.migrator.migrations))
        // The command let go of the lock once the tables were upgraded.
        _ = try ServeLock(storePath: path)
    }

    @Test func aStoreANewerVersionUpgradedIsRefusedButCanBeBackedUp() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID()).sqlite").path
        defer { remove(path); remove(path + ".copy") }
        _ = try SQLiteStore(path: path)
        try await DatabaseQueue(path: path).write { db in
            try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('store-v99-from-the-future')")
        }
        let server = try ServeLock(storePath: path)
        for upgrade in [SQLiteStore.SchemaUpgrade.unlessServed, .whileServing(server)] {
            #expect {
                _ = try SQLiteStore(path: path, upgrade: upgrade)
            } throws: { error in
                "\(error)".contains("a newer attribution-gateway upgraded it (store-v99-from-the-future")
            }
        }
        withExtendedLifetime(server) {}
        let copy = try StoreBackup.copy(try SQLiteStore(path: path, upgrade: .never), to: path + ".copy")
        #expect(copy.records == 0)
        #expect(try applied(path + ".copy").contains("store-v99-from-the-future"))
    }

    @Test func aNewerVersionsDataOnlyUpgradeDoesNotKeepThisOneFromTheStore() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID()).sqlite").path
        defer { remove(path) }
        _ = try SQLiteStore(path: path)
        try await DatabaseQueue(path: path).write { db in
            try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('data:rows-fixed-later')")
        }
        let server = try ServeLock(storePath: path)
        _ = try SQLiteStore(path: path, upgrade: .whileServing(server))
        withExtendedLifetime(server) {}
    }

    /// Whether `condition` came true within a bound far above any wait here: a failure, not a hang.
    func eventually(_ condition: () -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition() {
            if ContinuousClock.now > deadline { return false }
            try await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    @Test func aServerStartingWhileACommandUpgradesTheTablesWaitsForIt() async throws {
        let path = try olderStore()
        defer { remove(path) }
        guard case .success(let upgrader) = try ServeLock.take(storePath: path, as: .upgrading, onWait: { _ in }) else {
            Issue.record("the lock was free")
            return
        }
        let lines = try String(contentsOfFile: upgrader.path, encoding: .utf8).split(separator: "\n")
        #expect(lines == ["\(getpid())", "upgrading"])
        let told = Mutex<[String]>([])
        let server = Task {
            try await onThread { try ServeLock(storePath: path) { message in told.withLock { $0.append(message) } } }
        }
        // It waits, and says so once, for as long as the upgrade holds the lock.
        try #require(try await eventually { !told.withLock { $0.isEmpty } })
        #expect(told.withLock { $0 } == ["pid \(getpid()) is upgrading the store's tables; waiting for it to finish"])
        withExtendedLifetime(upgrader) {}
        _ = consume upgrader
        let lock = try await server.value
        #expect(told.withLock { $0.count } == 1)
        // `upgrading` until it has the store open with its tables ready, then `serving`.
        #expect(try String(contentsOfFile: lock.path, encoding: .utf8) == "\(getpid())\nupgrading\n")
        _ = try SQLiteStore(path: path, upgrade: .whileServing(lock))
        #expect(try String(contentsOfFile: lock.path, encoding: .utf8) == "\(getpid())\nserving\n")
    }

    @Test func aCommandWaitsForAServerUpgradingTheTablesThenReadsThem() async throws {
        let path = try olderStore()
        defer { remove(path) }
        // A server of this release that has just taken the lock, and has not opened the store yet.
        let server = try ServeLock(storePath: path)
        let waiting = Mutex(false)
        let command = Task {
            try await onThread {
                _ = try SQLiteStore(path: path, upgrade: .unlessServed) { _ in waiting.withLock { $0 = true } }
            }
        }
        try #require(try await eventually { waiting.withLock { $0 } }, "\(command)")
        // The server finishes its upgrade and serves: the command reads the upgraded tables,
        // without taking a server of this version for an older one.
        _ = try SQLiteStore(path: path, upgrade: .whileServing(server))
        try await command.value
        #expect(try applied(path) == Set(SQLiteStoreSchema.migrator.migrations))
        withExtendedLifetime(server) {}
    }

    @Test func aStoreReachedThroughADanglingLinkHasTheLockOfTheFileItWillBe() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("link-\(UUID())")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(
            at: folder.appendingPathComponent("real"), withIntermediateDirectories: true)
        let target = folder.appendingPathComponent("real/store.sqlite").path
        let link = folder.appendingPathComponent("link.sqlite").path
        // Relative, as `ln -s real/store.sqlite link.sqlite` makes it; the file is not there yet.
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "real/store.sqlite")
        let first = try ServeLock(storePath: link)
        first.announce(.serving)
        #expect(throws: StoreOpenError.self) { _ = try ServeLock(storePath: target) }
        withExtendedLifetime(first) {}
    }

    @Test func aCurrentStoreOpensWhileAServerHoldsIt() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID()).sqlite").path
        defer { remove(path) }
        _ = try SQLiteStore(path: path)
        let server = try ServeLock(storePath: path)
        // `report` beside a running server of its own version.
        _ = try SQLiteStore(path: path, upgrade: .unlessServed)
        withExtendedLifetime(server) {}
    }
}
