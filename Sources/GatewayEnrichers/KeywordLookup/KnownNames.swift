import Foundation
import GatewayCore
import Logging

/// The names the keyword cache holds (fetched from Apple Ads or loaded by `keywords
/// import`), whatever their age: for showing records stored before their names were
/// known, as the keyword report does, not for enriching new records.
public struct KnownNames: Sendable {
    let cache: any KeywordNameStore

    /// The names beside the store: in its PostgreSQL database when `storageURL` is set,
    /// else in its SQLite file.
    public init(storagePath: String, storageURL: PostgresURL?, logger: Logger) async throws {
        cache = try await KeywordNameStorage.open(storagePath: storagePath, storageURL: storageURL, logger: logger)
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
