import Foundation
import GatewayCore
import Logging

/// What the `keyword_lookup` enricher keeps between requests and restarts, beside the
/// records (the SQLite file or the PostgreSQL database), so that every replica of one store
/// shares it: names already fetched, and the records routed before their names arrived.
///
/// Names expire after a TTL the enricher applies when it reads them; an id Apple does not
/// know is kept as an entry without a name. Deleted entities keep their names (Apple still
/// returns them).
protocol KeywordNameStore: Sendable {
    /// The entries held for `keys` (`keyword:ID`, `adgroup:ID`, `campaign:ID`), whatever their age.
    func entries(_ keys: [String]) async throws -> [String: KeywordNameEntry]

    /// Adds or replaces entries, all in one transaction (a report's thousands of names, one
    /// commit each, would take minutes).
    func store(_ entries: [String: KeywordNameEntry]) async throws

    /// Records routed without a name still on its way: kept, so that a restart (a deploy
    /// during an Apple Ads outage) does not leave them nameless in every sink. A record
    /// already owed keeps its first date.
    func rememberOwed(_ recordIDs: [String], now: Date) async throws

    /// The records still owed a name since `since`, oldest first; older ones are let go.
    func owed(since: Date) async throws -> [String]

    func letGoOwed(before: Date) async throws

    func forgetOwed(_ recordIDs: [String]) async throws
}

extension KeywordNameStore {
    func store(_ key: String, _ entry: KeywordNameEntry) async throws {
        try await store([key: entry])
    }
}

/// One cached answer of Apple's: a name (with a keyword's match type), or none for an id
/// Apple does not know.
struct KeywordNameEntry: Sendable, Equatable {
    var name: String?
    var matchType: String?
    var fetchedAt: Date
}

/// Opens the name store of the gateway's storage: its PostgreSQL database when
/// `storage.postgres` is set, else its SQLite file.
enum KeywordNameStorage {
    static func open(storagePath: String, storageURL: PostgresURL?, logger: Logger) async throws
        -> any KeywordNameStore
    {
        if let storageURL { return try await PostgresKeywordNames(url: storageURL, logger: logger) }
        return try SQLiteKeywordNames(path: storagePath)
    }
}
