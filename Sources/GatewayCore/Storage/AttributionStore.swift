import Foundation

/// The gateway's durable state: records, dedupe keys, one outbox per sink and the
/// dead-letter queue. Everything that touches storage goes through this protocol so that
/// another database can serve several replicas without changing providers or sinks.
public protocol AttributionStore: Sendable {
    /// Stores records with their outbox rows in one transaction. A record whose dedupe
    /// key is already stored is not stored again; its result names the original.
    /// When this returns, every `.stored` record is durable.
    func ingest(_ batch: [RoutedRecord]) async throws -> [IngestResult]

    /// The ids of stored records for these dedupe keys, to skip work on duplicates early.
    func existingRecordIDs(dedupeKeys: [String]) async throws -> [String: String]

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

    /// Dead letters, newest first.
    func deadLetters(sink: String?, limit: Int) async throws -> [DeadLetter]

    /// Moves dead letters back to their sink's outbox, due now. Returns how many.
    func retryDeadLetters(ids: [Int64]?, sink: String?, now: Date) async throws -> Int

    /// Deletes dead letters for good. Returns how many.
    func dropDeadLetters(ids: [Int64]?, sink: String?) async throws -> Int

    /// Stored records matching `filter`, in storage order after `cursor`, for replays: each
    /// with its id, the record `nil` where its body cannot be read. Returns the cursor to
    /// continue from.
    func readableRecords(matching filter: ReplayFilter, after cursor: Int64, limit: Int) async throws
        -> (records: [(recordID: String, record: AttributionRecord?)], cursor: Int64)

    /// Counts the stored records matching `filter`.
    func countRecords(matching filter: ReplayFilter) async throws -> Int

    /// Queues stored records for `sink` again, due now; records already waiting for it
    /// are not queued twice. Returns how many were queued.
    func enqueue(recordIDs: [String], sink: String, now: Date) async throws -> Int

    /// The stored record with this id.
    func record(id: String) async throws -> AttributionRecord?

    /// Replaces stored records by `record_id` with a newer version (late enrichment) and
    /// queues them again for their sinks, due now. Records not stored (yet) are skipped.
    /// Returns how many were replaced.
    func replaceRecords(_ records: [RoutedRecord], now: Date) async throws -> Int

    // MARK: pending work (payloads waiting for an outside answer)

    /// Keeps accepted work, due now, unless its dedupe key is already a record or pending.
    func addPending(_ work: PendingWork, now: Date) async throws -> PendingAdmission

    /// Up to `limit` of `provider`'s due work, oldest due first, each hidden from further
    /// claims for `lease` so that work a crash interrupts comes back by itself.
    func claimPending(provider: String, now: Date, lease: Duration, limit: Int) async throws -> [PendingWork]

    /// When `provider`'s next pending work is due, if it has any.
    func nextPendingDate(provider: String) async throws -> Date?

    /// Writes the outcomes of a round of attempts in one transaction: finished work is
    /// replaced by its records (with their outbox rows), the rest gets its next attempt.
    /// Returns the ingest results of each finished work's records, by record id.
    func settlePending(_ settlements: [PendingSettlement]) async throws -> [String: [IngestResult]]

    /// Pending work per provider.
    func pendingCounts() async throws -> [String: Int]

    /// Whether the work that will become record `recordID` is still waiting.
    func isPending(recordID: String) async throws -> Bool

    // MARK: users of the ASA Attribution SDK's backend contract

    /// A new user with the next integer id.
    func createSDKUser(now: Date) async throws -> SDKUser

    /// The ids of a user's purchase records still `pending`: the records whose dedupe
    /// key is `keyPrefix` and one of the user's transaction ids.
    func sdkPendingPurchaseIDs(userID: Int64, keyPrefix: String) async throws -> [String]

    /// The answered records of the users who still have a purchase `pending` (dedupe key
    /// `keyPrefix` and one of their transaction ids): purchases whose crediting a crash or
    /// a busy store cut short.
    func sdkAnsweredUsersWithPendingPurchases(keyPrefix: String) async throws -> [String]

    func sdkUser(id: Int64) async throws -> SDKUser?

    /// Links a user to the record of their AdServices token.
    func setSDKUserAttribution(userID: Int64, recordID: String) async throws

    /// Ties a StoreKit original transaction id to a user, once.
    func associateTransaction(userID: Int64, transactionID: String, now: Date) async throws -> TransactionAssociation

    /// Fails when the store cannot be read.
    func ping() async throws
}

/// The outcome of one attempt at pending work, as the store writes it.
public enum PendingSettlement: Sendable {
    /// These records replace the work `recordID`.
    case finished(recordID: String, records: [RoutedRecord])
    /// The work stays, with new state, for another attempt at `at`.
    case retry(recordID: String, state: Data, attempts: Int, at: Date, error: String)
}

/// A user of the ASA Attribution SDK's backend: the SDK knows them by an integer id.
public struct SDKUser: Sendable, Equatable {
    public var id: Int64
    /// The AdServices record of their token (pending until Apple answers).
    public var attributionRecordID: String?
    public var createdAt: Date

    public init(id: Int64, attributionRecordID: String?, createdAt: Date) {
        self.id = id
        self.attributionRecordID = attributionRecordID
        self.createdAt = createdAt
    }
}

/// What associating a transaction with a user did.
public enum TransactionAssociation: Sendable, Equatable {
    case associated
    /// The same user had it already: associating again changes nothing.
    case alreadyAssociated
    /// Another user has it.
    case belongsTo(userID: Int64)
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
    /// (see ``AttributionStore/markSending(id:now:)``).
    public var wasBeingSent = false

    public init(id: Int64, record: AttributionRecord, attempts: Int, queuedAt: Date? = nil) {
        self.id = id
        self.record = record
        self.attempts = attempts
        self.queuedAt = queuedAt
    }

    public static func unreadable(id: Int64, attempts: Int, reason: String) -> OutboxEntry {
        var entry = OutboxEntry(
            id: id, record: AttributionRecord(provider: "", kind: .event, dedupeKey: "", receivedAt: Date(), recordID: ""),
            attempts: attempts)
        entry.unreadable = reason
        return entry
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

/// A record a sink gave up on.
public struct DeadLetter: Sendable {
    public var id: Int64
    public var sink: String
    public var recordID: String
    public var attempts: Int
    public var error: String
    public var failedAt: Date

    public init(id: Int64, sink: String, recordID: String, attempts: Int, error: String, failedAt: Date) {
        self.id = id
        self.sink = sink
        self.recordID = recordID
        self.attempts = attempts
        self.error = error
        self.failedAt = failedAt
    }
}

extension AttributionStore {
    public func dueEntries(sink: String, now: Date, limit: Int) async throws -> [OutboxEntry] {
        try await dueEntries(sink: sink, now: now, limit: limit, laneOrdered: false)
    }

    public func nextDueDate(sink: String) async throws -> Date? {
        try await nextDueDate(sink: sink, laneOrdered: false)
    }
}
