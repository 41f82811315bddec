import Foundation

/// One outbox per sink: the records routed to it and not yet delivered or given up on.
///
/// The contract every backend keeps:
/// - a row is due from its `next_attempt_at`; `dueEntries` hands out the due rows oldest
///   first and, on a store several processes share, claims them under a lease so that no
///   other process is handed them until they are resolved or the lease runs out (a process
///   killed mid-batch has its rows taken over then);
/// - a resolution is written in one transaction: delivered rows go, retried rows get their
///   next attempt, dead-lettered rows move to the dead letters.
public protocol OutboxStore: Sendable {
    /// Up to `limit` outbox entries of `sink` due at `now`, oldest first.
    /// With `laneOrdered`, only the oldest undelivered row of each lane (a device, see
    /// ``AttributionRecord/deliveryLane``) is due, so a device's records go out in the
    /// order they were stored, whatever their retry times.
    func dueEntries(sink: String, now: Date, limit: Int, laneOrdered: Bool) async throws -> [OutboxEntry]

    /// When the next entry of `sink` is due, if it has any.
    /// The next time a row becomes due, counting only lane heads when `laneOrdered`.
    func nextDueDate(sink: String, laneOrdered: Bool) async throws -> Date?

    /// Applies the worker's decisions about a batch in one transaction.
    func resolve(sink: String, _ resolutions: [OutboxResolution], now: Date) async throws

    /// Gives back rows this process claimed and leaves unresolved (a batch a shutdown cut
    /// short), due again when they were before the claim, so that another process takes
    /// them at once rather than when the lease ends. A row resolved or claimed again since
    /// is left as it is. A store no other process shares leases nothing: it has nothing to
    /// give back.
    func unclaim(sink: String, _ entries: [OutboxEntry]) async throws

    /// Marks an outbox row as being sent, durably, before a sink whose destination counts
    /// every copy sends it: a row still so marked when it is next due was being sent when
    /// the gateway stopped (``OutboxEntry/wasBeingSent``). Any resolution clears it.
    func markSending(id: Int64, now: Date) async throws

    /// For a sink delivering in device order: the rows behind each retried head (by
    /// outbox id) wait until the head's next attempt too, so that while a device's
    /// queue is blocked its rows are not due and not scanned on every wake.
    func holdLanes(sink: String, behind heads: [(id: Int64, until: Date)]) async throws

    /// Undelivered entries per sink, with the age of the oldest.
    func outboxStats() async throws -> [String: OutboxStats]

    /// Queues stored records for `sink` again, due now; records already waiting for it
    /// are not queued twice, and a dead letter of a record queued again is retried by it.
    /// Returns how many were queued.
    func enqueue(recordIDs: [String], sink: String, now: Date) async throws -> Int
}

/// One record waiting in one sink's outbox.
public struct OutboxEntry: Sendable {
    public var id: Int64
    public var record: AttributionRecord
    /// Failed attempts so far.
    public var attempts: Int
    /// Why the stored record could not be read; the worker dead-letters such an entry
    /// (counted and logged like any) instead of offering `record`, a placeholder.
    public var unreadable: String?
    /// When the row was queued for the sink (its record's commit, a replay, a retry of a
    /// dead letter): what the delivery latency counts from.
    public var queuedAt: Date?
    /// A sink was sending it when the gateway stopped, before its answer was written
    /// (see ``OutboxStore/markSending(id:now:)``).
    public var wasBeingSent = false
    /// The lease this process holds on the row, on a store several processes share.
    public var claim: OutboxClaim?

    public init(id: Int64, record: AttributionRecord, attempts: Int, queuedAt: Date? = nil) {
        self.id = id
        self.record = record
        self.attempts = attempts
        self.queuedAt = queuedAt
    }

    public static func unreadable(id: Int64, attempts: Int, reason: String) -> OutboxEntry {
        var entry = OutboxEntry(
            id: id,
            record: AttributionRecord(provider: "", kind: .event, dedupeKey: "", receivedAt: Date(), recordID: ""),
            attempts: attempts)
        entry.unreadable = reason
        return entry
    }
}

/// A row's lease, as the store that wrote it keeps its times: what ``OutboxStore/unclaim(sink:_:)``
/// needs to give the row back only while it is still this claim's.
public struct OutboxClaim: Sendable, Equatable {
    /// When the row was due before the claim.
    public var dueAt: Double
    /// The end of the lease the claim wrote.
    public var until: Double

    public init(dueAt: Double, until: Double) {
        self.dueAt = dueAt
        self.until = until
    }
}

/// The worker's decision about one outbox entry.
public enum OutboxResolution: Sendable, Equatable {
    case delivered(id: Int64)
    case retry(id: Int64, attempts: Int, at: Date, error: String)
    case deadLetter(id: Int64, attempts: Int, error: String)
}

/// Depth and age of one sink's outbox.
public struct OutboxStats: Sendable, Equatable {
    public var depth: Int
    public var oldest: Date?

    public init(depth: Int, oldest: Date?) {
        self.depth = depth
        self.oldest = oldest
    }
}

extension OutboxStore {
    public func dueEntries(sink: String, now: Date, limit: Int) async throws -> [OutboxEntry] {
        try await dueEntries(sink: sink, now: now, limit: limit, laneOrdered: false)
    }

    public func nextDueDate(sink: String) async throws -> Date? {
        try await nextDueDate(sink: sink, laneOrdered: false)
    }
}
