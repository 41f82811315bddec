import Foundation
import GatewayCore
import Logging

/// The names the keyword cache holds (fetched from Apple Ads or loaded by `keywords
/// import`), whatever their age: for showing records stored before their names were
/// known, as the keyword report does, not for enriching new records. And the spend
/// beside them, for the report's costs.
public struct KnownNames: Sendable {
    let cache: any KeywordNameStore
    let spendStore: any SpendStore

    /// The names beside the store: in its PostgreSQL database when `storageURL` is set,
    /// else in its SQLite file.
    public init(storagePath: String, storageURL: PostgresURL?, logger: Logger) async throws {
        cache = try await KeywordNameStorage.open(storagePath: storagePath, storageURL: storageURL, logger: logger)
        spendStore = try await SpendStorage.open(storagePath: storagePath, storageURL: storageURL, logger: logger)
    }

    /// Apple Ads spend per keyword id over the days `from` (inclusive) to `until`
    /// (exclusive), `YYYY-MM-DD`, as the daily fetch and `import spend` stored it.
    public func spend(from: String?, until: String?) async throws -> [Int64: KeywordSpend] {
        try await spendStore.totals(from: from, until: until)
    }

    /// Names by cache key (`keyword:ID`, `adgroup:ID`, `campaign:ID`), with a keyword's
    /// match type; ids Apple does not know are left out.
    public func names(_ keys: [String]) async throws -> [String: (name: String, matchType: String?)] {
        var found: [String: (name: String, matchType: String?)] = [:]
        for (key, entry) in try await cache.entries(keys) {
            if let name = entry.name { found[key] = (name, entry.matchType) }
        }
        return found
    }
}
