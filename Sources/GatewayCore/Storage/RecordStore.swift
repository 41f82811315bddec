import Foundation

/// Accepted records with their dedupe keys and the outbox rows the router chose for them.
///
/// The contract every backend keeps:
/// - a record and its outbox rows commit together, or not at all, and when a call returns
///   every `.stored` record is durable;
/// - a dedupe key is stored once: a second record with it, from this process or another
///   sharing the database, is answered `.duplicate` naming the first one's id;
/// - records are read back in the order they were stored (a cursor per call).
public protocol RecordStore: Sendable {
    /// Stores records with their outbox rows in one transaction. A record whose dedupe
    /// key is already stored is not stored again; its result names the original.
    func ingest(_ batch: [RoutedRecord]) async throws -> [IngestResult]

    /// The ids of stored records for these dedupe keys, to skip work on duplicates early;
    /// keyed by bytes, as the store compares keys.
    func existingRecordIDs(dedupeKeys: [String]) async throws -> [DedupeKey.Bytes: String]

    /// The stored record with this id.
    func record(id: String) async throws -> AttributionRecord?

    /// Stored records matching `filter`, in storage order after `cursor`, for replays: each
    /// with its id, the record `nil` where its body cannot be read. Returns the cursor to
    /// continue from.
    func readableRecords(matching filter: ReplayFilter, after cursor: Int64, limit: Int) async throws
        -> (records: [(recordID: String, record: AttributionRecord?)], cursor: Int64)

    /// Counts the stored records matching `filter`.
    func countRecords(matching filter: ReplayFilter) async throws -> Int

    /// Replaces stored records by `record_id` with a newer version (late enrichment) and
    /// queues them again for their sinks, due now. Records not stored (yet) are skipped, and
    /// so is a record whose dedupe key is no longer the version's: a forget request reduced
    /// it while the version was made from what it was before. Returns how many were replaced.
    func replaceRecords(_ records: [RoutedRecord], now: Date) async throws -> Int

    /// Drops `provider`'s oldest quarantined records (``AttributionRecord/isQuarantined``),
    /// in storage order, until those left take at most `maxBytes`, each counted as the
    /// bytes of its stored JSON. A record a sink has yet to take (an outbox row or a dead
    /// letter names it) is never dropped: it stays, and counts. A dropped record's dedupe
    /// key goes with it, so a copy posted later is stored anew. Returns what was dropped
    /// and what the quarantine holds after.
    func trimQuarantined(provider: String, maxBytes: Int) async throws -> QuarantineTrim

    /// Fails when the store cannot be reached or read.
    func ping() async throws
}

/// What ``RecordStore/trimQuarantined(provider:maxBytes:)`` did.
public struct QuarantineTrim: Sendable, Equatable {
    /// Records dropped.
    public var dropped: Int
    /// The bytes of the provider's quarantined records left, those waiting for a sink included.
    public var keptBytes: Int

    public init(dropped: Int, keptBytes: Int) {
        self.dropped = dropped
        self.keptBytes = keptBytes
    }
}

/// Which stored records a replay re-delivers.
public struct ReplayFilter: Sendable {
    public var since: Date?
    public var provider: String?

    public init(since: Date? = nil, provider: String? = nil) {
        self.since = since
        self.provider = provider
    }
}

/// A record and the sinks the router chose for it.
public struct RoutedRecord: Sendable {
    public var record: AttributionRecord
    public var sinks: [String]

    public init(record: AttributionRecord, sinks: [String]) {
        self.record = record
        self.sinks = sinks
    }
}

/// What the store did with one record of a batch.
public enum IngestResult: Sendable, Equatable {
    case stored(recordID: String)
    case duplicate(of: String)
}
