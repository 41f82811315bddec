import Foundation

/// How long what records hold is kept (`storage.retention`).
///
/// The contract every backend keeps: a body is rewritten only if it has not changed since
/// it was read, so that a version stored meanwhile (late enrichment) is never replaced by
/// an older one; each call is one short transaction, so that a pass over a large store
/// never holds ingest up for long.
public protocol RetentionStore: Sendable {
    /// Removes the raw payload from the bodies of up to `limit` records received before
    /// `before`, the next after `cursor` in the order they were received. Returns how many
    /// bodies changed and the cursor to go on from, `nil` once no such record is left.
    func dropRawPayloads(receivedBefore before: Date, after cursor: RetentionCursor, limit: Int) async throws
        -> (dropped: Int, cursor: RetentionCursor?)

    /// Deletes up to `limit` of the records received before `before` that no sink waits
    /// for (no outbox row, no dead letter) and no ASA SDK user's attribution names (their
    /// later purchases are credited by it), oldest first, with their dedupe keys: a copy
    /// posted later is stored anew. A record a sink still waits for stays until it is
    /// delivered or dropped, and goes at a later call. Returns how many it deleted.
    func deleteRecords(receivedBefore before: Date, limit: Int) async throws -> Int
}

/// A place in the records taken in the order they were received (ties by storage order):
/// a pass goes on from where the last one stopped, and reads each old record once.
public struct RetentionCursor: Sendable, Equatable {
    public var receivedAt: Double
    public var seq: Int64

    public init(receivedAt: Double, seq: Int64) {
        self.receivedAt = receivedAt
        self.seq = seq
    }

    public static let start = RetentionCursor(receivedAt: -Double.greatestFiniteMagnitude, seq: 0)
}

/// What one page of ``RetentionStore/dropRawPayloads(receivedBefore:after:limit:)`` changes,
/// from each row's place and its body (nil where the database found no raw payload in it).
public struct RawPayloadRemoval: Sendable {
    /// The bodies to write, each with the body read, which must still be the stored one.
    public var changes: [(seq: Int64, old: String, new: String)] = []
    /// Where the next page starts; nil for an empty page, the end.
    public var next: RetentionCursor?

    public init(page: [(seq: Int64, receivedAt: Double, body: String?)]) {
        next = page.last.map { RetentionCursor(receivedAt: $0.receivedAt, seq: $0.seq) }
        changes = page.compactMap { row in
            guard let body = row.body, let new = AttributionRecord.bodyWithoutRaw(body) else { return nil }
            return (row.seq, body, new)
        }
    }
}

extension AttributionRecord {
    /// `body` (a stored record) without its raw payload, or nil when it has none or cannot
    /// be read (a damaged body is left for the worker to dead-letter, not rewritten).
    public static func bodyWithoutRaw(_ body: String) -> String? {
        guard var record = try? AttributionRecord(jsonData: Data(body.utf8)), record.raw != nil else { return nil }
        record.raw = nil
        return record.encoded().text
    }
}
