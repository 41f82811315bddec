import Foundation
@testable import GatewayStorage
import GRDB
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

    @Test func anOlderStoreThatAServerHoldsIsNotUpgradedUnderIt() throws {
        let path = try olderStore()
        defer { remove(path) }
        let last = SQLiteStoreSchema.migrator.migrations.last!
        let server = try ServeLock(storePath: path)

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
        _ = try SQLiteStore(path: path, upgrade: .whileServing)
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
        for upgrade in [SQLiteStore.SchemaUpgrade.unlessServed, .whileServing] {
            #expect {
                _ = try SQLiteStore(path: path, upgrade: upgrade)
            } throws: { error in
                "\(error)".contains("a newer attribution-gateway upgraded it (store-v99-from-the-future")
            }
        }
        let copy = try StoreBackup.copy(try SQLiteStore(path: path, upgrade: .never), to: path + ".copy")
        #expect(copy.records == 0)
        #expect(try applied(path + ".copy").contains("store-v99-from-the-future"))
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
