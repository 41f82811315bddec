import Foundation
import GRDB
import GatewayCore
import GatewayPostgres
import GatewayStorage
import GatewayTestSupport
import Logging
import PostgresNIO
import Synchronization
import Testing

/// The backends every store role is checked against, each made fresh for one test: memory, a
/// SQLite file in the temporary folder, and a database of its own on the PostgreSQL server that
/// `scripts/with-postgres` starts (`GATEWAY_TEST_POSTGRES_URL`). Under CI a missing server
/// fails the PostgreSQL cases rather than skipping them.
enum StoreBackend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case memory
    case sqlite
    case postgres

    var testDescription: String { rawValue }

    /// Every backend this run can reach, PostgreSQL included under CI whether or not it can.
    static var available: [StoreBackend] {
        allCases.filter { $0 != .postgres || TestPostgres.expected }
    }

    /// The shared backends, where several processes use one store at once.
    static var shared: [StoreBackend] { available.filter { $0 == .postgres } }

    /// A new, empty store, and a function that opens another store on the same data (a
    /// second replica, or the same process reopening it).
    func make(clock: TestClock) async throws -> StoreUnderTest {
        switch self {
        case .memory:
            // One process's memory: another store on the same data is the same store.
            let store = InMemoryStore(now: { clock.now })
            return StoreUnderTest(store: store, open: { store })
        case .sqlite:
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("roles-\(UUID()).sqlite").path
            let open: @Sendable () async throws -> any AttributionStore = {
                try SQLiteStore(path: path, durability: .normal, now: { clock.now })
            }
            return StoreUnderTest(
                store: try await open(), open: open,
                execute: { sql in try await DatabaseQueue(path: path).write { try $0.execute(sql: sql) } })
        case .postgres:
            let target = try await TestPostgres.newDatabase()
            let open: @Sendable () async throws -> any AttributionStore = { [target] in
                try await PostgresStore(url: target, poolSize: 4, outboxLease: .seconds(60), now: { clock.now })
            }
            return StoreUnderTest(
                store: try await open(), open: open,
                execute: { sql in
                    try await TestPostgres.withClient(target) { _ = try await $0.query(PostgresQuery(unsafeSQL: sql)) }
                })
        }
    }
}

struct StoreUnderTest: Sendable {
    let store: any AttributionStore
    /// Another store on the same data.
    let open: @Sendable () async throws -> any AttributionStore
    /// Runs SQL on the store's database, as an operator at its console would; not on memory.
    var execute: @Sendable (String) async throws -> Void = { _ in Issue.record("no SQL in memory") }
}

/// The time the stores queue rows at, moved by the test.
final class TestClock: Sendable {
    private let value = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
    var now: Date { value.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { value.withLock { $0 = $0.addingTimeInterval(seconds) } }
}
