import Foundation
import GatewayCore
import GatewayTestSupport
import Logging
import Testing

@testable import GatewayEnrichers

/// The keyword names kept beside the store, on SQLite and on PostgreSQL: what the enricher,
/// `keywords import` and the report rely on, whichever backend holds the records.
@Suite struct KeywordNameStoreTests {
    static let backends = ["sqlite"] + (TestPostgres.expected ? ["postgres"] : [])

    /// A new, empty name store of `backend`, and a function opening another one on the same data
    /// (a second replica, or a restart).
    static func make(_ backend: String) async throws -> @Sendable () async throws -> any KeywordNameStore {
        let logger = Logger(label: "test")
        if backend == "postgres" {
            let url = try await TestPostgres.newDatabase()
            return { try await KeywordNameStorage.open(storagePath: "", storageURL: url, logger: logger) }
        }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("names-\(UUID()).sqlite").path
        return { try await KeywordNameStorage.open(storagePath: path, storageURL: nil, logger: logger) }
    }

    @Test(arguments: backends)
    func namesAreKeptReplacedAndSeenByAnotherOpening(_ backend: String) async throws {
        let open = try await Self.make(backend)
        let names = try await open()
        let at = Date(timeIntervalSince1970: 1_700_000_000)
        // More than one statement's worth, as a large keyword report import writes.
        var many: [String: KeywordNameEntry] = [:]
        for id in 0..<2500 {
            many["keyword:\(id)"] = KeywordNameEntry(name: "kw \(id)", matchType: "EXACT", fetchedAt: at)
        }
        many["campaign:7"] = KeywordNameEntry(name: nil, matchType: nil, fetchedAt: at)
        try await names.store(many)
        try await names.store("keyword:1", KeywordNameEntry(name: "renamed", matchType: "BROAD", fetchedAt: at + 60))

        let other = try await open()
        let found = try await other.entries(["keyword:1", "keyword:2499", "campaign:7", "adgroup:9"])
        #expect(found["keyword:1"] == KeywordNameEntry(name: "renamed", matchType: "BROAD", fetchedAt: at + 60))
        #expect(found["keyword:2499"]?.name == "kw 2499")
        // An id Apple does not know is an entry without a name; one never asked is absent.
        #expect(found["campaign:7"] == KeywordNameEntry(name: nil, matchType: nil, fetchedAt: at))
        #expect(found["adgroup:9"] == nil)
        #expect(try await other.entries([]).isEmpty)
    }

    @Test(arguments: backends)
    func recordsOwedANameAreKeptInOrderUntilForgottenOrTooOld(_ backend: String) async throws {
        let open = try await Self.make(backend)
        let names = try await open()
        let day: TimeInterval = 86_400
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        try await names.rememberOwed(["old"], now: start)
        try await names.rememberOwed(["b", "a"], now: start + day)
        try await names.rememberOwed(["c"], now: start + 2 * day)
        // Owed again later: it keeps its first date, so it is not kept longer than the rest.
        try await names.rememberOwed(["a"], now: start + 3 * day)

        let other = try await open()
        #expect(try await other.owed(since: start) == ["old", "a", "b", "c"])
        try await other.forgetOwed(["b"])
        #expect(try await names.owed(since: start + day / 2) == ["a", "c"])
        // Let go: not owed any more, even if asked from before.
        #expect(try await names.owed(since: start) == ["a", "c"])
        try await names.letGoOwed(before: start + 3 * day)
        #expect(try await other.owed(since: start).isEmpty)
    }
}

extension KeywordLookupTests {
    static let sharedStores = TestPostgres.expected ? ["postgres"] : []

    /// Replicas on one PostgreSQL store share the names: a name one fetched is not asked of
    /// Apple again by the other, even on its first lookup.
    @Test(arguments: sharedStores)
    func replicasOnPostgreSQLShareTheNamesOneOfThemFetched(_ backend: String) async throws {
        let url = try await TestPostgres.newDatabase()
        try await withFake { fake, port in
            let context = EnricherContext(storagePath: "", storageURL: url, logger: Logger(label: "test"))
            let first = try await KeywordLookupPlugin.make(options: options(port: port), context: context)
            let second = try await KeywordLookupPlugin.make(options: options(port: port), context: context)
            #expect(await first.enrich([record(keyword: 4242)]).first?.keyword == "keyword 4242")
            let asked = fake.count("keyword") + fake.count("keyword-query")
            #expect(asked == 1)

            let named = await second.enrich([record(keyword: 4242)])
            #expect(named.first?.keyword == "keyword 4242")
            #expect(named.first?.campaignName == "campaign 542370539")
            #expect(fake.count("keyword") + fake.count("keyword-query") == asked)
            #expect(fake.count("campaign") == 1 && fake.count("adgroup") == 1)
        }
    }
}
