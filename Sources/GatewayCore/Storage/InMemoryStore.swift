import Foundation
import Synchronization

/// Every store role kept in memory, with the SQLite store's observable semantics: for tests, and for embedding the
/// gateway where nothing needs to outlive the process. Nothing is written to disk, so everything is lost when the
/// process ends.
public final class InMemoryStore: AttributionStore {
    let state = Mutex(State())
    /// When ingested and settled records' outbox rows are queued, as the SQLite store's `now`.
    let now: @Sendable () -> Date

    public init(now: @escaping @Sendable () -> Date = { Date() }) {
        self.now = now
    }

    /// Makes every call throw ``StoreUnavailable`` until called with `false`: for tests of what the gateway
    /// answers when its store cannot be reached.
    public func setUnavailable(_ unavailable: Bool) {
        state.withLock { $0.unavailable = unavailable }
    }

    /// Runs `body` under the lock: one call is one transaction, as each SQLite write is.
    func withState<T: Sendable>(_ body: (inout State) throws -> T) throws -> T {
        try state.withLock { state in
            if state.unavailable { throw StoreUnavailable() }
            return try body(&state)
        }
    }

    /// SQLite's `LIMIT`: a negative one is no limit.
    static func rows(_ limit: Int) -> Int {
        limit < 0 ? .max : limit
    }

    /// A write the SQLite store's tables would refuse by a constraint (a record id stored under another dedupe
    /// key, a sink named twice for one record, a transaction for a user who does not exist): the whole call
    /// fails and changes nothing, as a rolled back transaction does.
    public struct ConstraintViolation: Error, CustomStringConvertible {
        public let description: String
    }
}

/// What every call of an ``InMemoryStore`` made unavailable throws.
public struct StoreUnavailable: Error, CustomStringConvertible {
    public init() {}

    public var description: String { "the store is unavailable" }
}

extension InMemoryStore {
    /// Text compared as SQLite's default collation compares it, byte for byte: `String`'s `==` holds canonically
    /// equivalent spellings equal, which would make two dedupe keys SQLite keeps apart one.
    struct Text: Hashable, Comparable, Sendable {
        let string: String

        init(_ string: String) {
            self.string = string
        }

        static func == (a: Text, b: Text) -> Bool {
            a.string.utf8.elementsEqual(b.string.utf8)
        }

        static func < (a: Text, b: Text) -> Bool {
            a.string.utf8.lexicographicallyPrecedes(b.string.utf8)
        }

        func hash(into hasher: inout Hasher) {
            var string = string
            string.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        }
    }

    /// A sink's row for a record: the outbox's and the dead letters' unique pair.
    struct RowKey: Hashable, Sendable {
        let sink: Text
        let recordID: Text
    }

    /// Times are kept as SQLite keeps them, seconds since 1970 in a `Double`, so that dates read back and
    /// comparisons are the SQLite store's to the last bit.
    struct StoredRecord: Sendable {
        let seq: Int64
        let recordID: String
        /// Changes once: a forgotten user's record gets a key that names nothing of theirs.
        var dedupeKey: String
        let provider: String
        let appID: String?
        let receivedAt: Double
        /// The record's JSON; read back through it, so that a record comes back as the SQLite store gives it.
        var body: String
        /// For a quarantined record, the bytes of `body`, as the SQLite store's `quarantined_bytes`.
        var quarantinedBytes: Int?

        var lane: Text? {
            (try? AttributionRecord(jsonData: Data(body.utf8)))?.deliveryLane.map(Text.init)
        }

        /// The SQLite store's `replayCondition`.
        func matches(_ filter: ReplayFilter) -> Bool {
            (filter.since.map { receivedAt >= $0.timeIntervalSince1970 } ?? true)
                && (filter.provider.map { Text($0) == Text(provider) } ?? true)
        }
    }

    struct OutboxRow: Sendable {
        let id: Int64
        let sink: Text
        let recordID: Text
        var attempts: Int
        var nextAttemptAt: Double
        let createdAt: Double
        var lastError: String?
        let lane: Text?
        /// A late version's row keeps its first row's place (see ``InMemoryStore/replaceRecords(_:now:)``).
        let position: Int64?
        var sendingSince: Double?

        var key: RowKey { RowKey(sink: sink, recordID: recordID) }
        /// Its place in its lane: queued first is sent first.
        var order: Int64 { position ?? id }

        /// The SQLite store's `behindItsLane`, given the first place of each lane of the row's sink.
        func isBehind(_ fronts: [Text: Int64]) -> Bool {
            guard let lane, let front = fronts[lane] else { return false }
            return front < order
        }
    }

    struct PendingRow: Sendable {
        /// Insertion order, SQLite's rowid: the last tie-break of due work.
        let rowID: Int64
        let recordID: String
        let provider: String
        let dedupeKey: String
        let appID: String?
        let receivedAt: Double
        var state: Data
        var attempts: Int
        var nextAttemptAt: Double
        var lastError: String?
        var claimedUntil: Double?

        var work: PendingWork {
            PendingWork(
                recordID: recordID, provider: provider, dedupeKey: dedupeKey, appID: appID,
                receivedAt: Date(timeIntervalSince1970: receivedAt), state: state, attempts: attempts)
        }
    }

    struct SDKUserRow: Sendable {
        let createdAt: Double
        var attributionRecordID: String?
    }

    struct State: Sendable {
        var unavailable = false
        /// In storage order (by `seq`); only quarantined ones are ever deleted.
        var records: [StoredRecord] = []
        /// The `last…` ids count up and are never reused, as SQLite's `AUTOINCREMENT` ones, and like them are used
        /// up by an insert that a conflict ignores: a duplicate's `seq` is skipped, and an outbox row queued again
        /// its id.
        var lastSeq: Int64 = 0
        var recordByID: [Text: Int] = [:]
        var recordByKey: [Text: Int] = [:]
        var outbox: [Int64: OutboxRow] = [:]
        var outboxByKey: [RowKey: Int64] = [:]
        var lastOutboxID: Int64 = 0
        var deadLetters: [Int64: DeadLetter] = [:]
        var deadLetterByKey: [RowKey: Int64] = [:]
        var lastDeadLetterID: Int64 = 0
        var pending: [Text: PendingRow] = [:]
        var pendingByKey: [Text: Text] = [:]
        var lastPendingRowID: Int64 = 0
        var sdkUsers: [Int64: SDKUserRow] = [:]
        /// In the order they were associated, the order SQLite reads a user's by their index.
        var transactions: [(id: String, userID: Int64)] = []
        var transactionOwners: [Text: Int64] = [:]
        var forgetRequests: [Text: ForgetRow] = [:]
    }

    /// The SQLite store's `forget_requests` row with its `forget_answers`.
    struct ForgetRow: Sendable {
        let appID: String
        let userDigest: String
        let requestedAt: Double
        var completedAt: Double?
        let recordsForgotten: Int
        let sinks: [String]
        /// Until every sink has answered.
        var identifiers: ForgottenIdentifiers?
        var answers: [String: (state: String, reason: String?)] = [:]
    }
}

extension InMemoryStore.State {
    typealias Text = InMemoryStore.Text

    /// Fails before anything is written if `batch` breaks a constraint that SQLite would fail the whole
    /// transaction on: a new dedupe key with a record id stored already, or a sink twice for one record.
    func checkInsert(_ batch: [RoutedRecord]) throws {
        var keys = Set<Text>()
        var ids = Set<Text>()
        for item in batch {
            let key = Text(item.record.dedupeKey)
            // A duplicate is answered, not refused: SQLite checks the `ON CONFLICT` key first.
            guard recordByKey[key] == nil, keys.insert(key).inserted else { continue }
            let id = Text(item.record.recordID)
            guard recordByID[id] == nil, ids.insert(id).inserted else {
                throw InMemoryStore.ConstraintViolation(description: "record id \(id.string) is stored already")
            }
            guard Set(item.sinks.map(Text.init)).count == item.sinks.count else {
                throw InMemoryStore.ConstraintViolation(
                    description: "record \(id.string) is routed to a sink twice: \(item.sinks)")
            }
        }
    }

    /// Stores records and their outbox rows, after ``checkInsert(_:)``; a dedupe key stored already names the
    /// original instead.
    mutating func insert(_ batch: [RoutedRecord], bodies: [String], queuedAt: Double) -> [IngestResult] {
        var results: [IngestResult] = []
        for (item, body) in zip(batch, bodies) {
            let record = item.record
            lastSeq += 1
            if let original = recordByKey[Text(record.dedupeKey)] {
                results.append(.duplicate(of: records[original].recordID))
                continue
            }
            let index = records.count
            records.append(
                InMemoryStore.StoredRecord(
                    seq: lastSeq, recordID: record.recordID, dedupeKey: record.dedupeKey,
                    provider: record.provider, appID: record.appID,
                    receivedAt: record.receivedAt.timeIntervalSince1970, body: body,
                    quarantinedBytes: record.isQuarantined ? body.utf8.count : nil))
            recordByKey[Text(record.dedupeKey)] = index
            recordByID[Text(record.recordID)] = index
            for sink in item.sinks {
                addOutboxRow(
                    sink: Text(sink), recordID: Text(record.recordID), due: queuedAt, createdAt: queuedAt,
                    lane: record.deliveryLane.map(Text.init))
            }
            results.append(.stored(recordID: record.recordID))
        }
        return results
    }

    /// Adds a row unless the sink has one for the record already (SQLite's `INSERT OR IGNORE`, which uses up an
    /// id either way). Whether it did.
    @discardableResult
    mutating func addOutboxRow(
        sink: Text, recordID: Text, due: Double, createdAt: Double, lane: Text?, position: Int64? = nil
    ) -> Bool {
        let key = InMemoryStore.RowKey(sink: sink, recordID: recordID)
        lastOutboxID += 1
        guard outboxByKey[key] == nil else { return false }
        outbox[lastOutboxID] = InMemoryStore.OutboxRow(
            id: lastOutboxID, sink: sink, recordID: recordID, attempts: 0, nextAttemptAt: due, createdAt: createdAt,
            lastError: nil, lane: lane, position: position, sendingSince: nil)
        outboxByKey[key] = lastOutboxID
        return true
    }

    /// The index of the first record stored after `seq`.
    func firstRecord(after seq: Int64) -> Int {
        var (low, high) = (0, records.count)
        while low < high {
            let middle = (low + high) / 2
            if records[middle].seq > seq { high = middle } else { low = middle + 1 }
        }
        return low
    }

    @discardableResult
    mutating func removeOutboxRow(id: Int64) -> InMemoryStore.OutboxRow? {
        guard let row = outbox.removeValue(forKey: id) else { return nil }
        outboxByKey[row.key] = nil
        return row
    }
}

/// Records.
extension InMemoryStore {
    public func ingest(_ batch: [RoutedRecord]) async throws -> [IngestResult] {
        let bodies = batch.map { $0.record.encoded().text }
        // The rows count from their commit, not from the records' `received_at`, as the SQLite store's do.
        let queuedAt = now().timeIntervalSince1970
        return try withState { state in
            try state.checkInsert(batch)
            return state.insert(batch, bodies: bodies, queuedAt: queuedAt)
        }
    }

    public func existingRecordIDs(dedupeKeys: [String]) async throws -> [DedupeKey.Bytes: String] {
        guard !dedupeKeys.isEmpty else { return [:] }
        return try withState { state in
            var found: [DedupeKey.Bytes: String] = [:]
            for key in Set(dedupeKeys.map(Text.init)) {
                guard let index = state.recordByKey[key] else { continue }
                found[DedupeKey.Bytes(state.records[index].dedupeKey)] = state.records[index].recordID
            }
            return found
        }
    }

    public func record(id: String) async throws -> AttributionRecord? {
        let body = try withState { state in state.recordByID[Text(id)].map { state.records[$0].body } }
        return try body.map { try AttributionRecord(jsonData: Data($0.utf8)) }
    }

    public func readableRecords(matching filter: ReplayFilter, after cursor: Int64, limit: Int) async throws
        -> (records: [(recordID: String, record: AttributionRecord?)], cursor: Int64)
    {
        let page = try withState { state in
            Array(
                state.records[state.firstRecord(after: cursor)...].lazy.filter { $0.matches(filter) }
                    .prefix(Self.rows(limit)).map { (seq: $0.seq, recordID: $0.recordID, body: $0.body) })
        }
        let records = page.map { row in
            (recordID: row.recordID, record: try? AttributionRecord(jsonData: Data(row.body.utf8)))
        }
        return (records, page.last?.seq ?? cursor)
    }

    public func countRecords(matching filter: ReplayFilter) async throws -> Int {
        try withState { state in state.records.count { $0.matches(filter) } }
    }

    public func replaceRecords(_ records: [RoutedRecord], now: Date) async throws -> Int {
        guard !records.isEmpty else { return 0 }
        let bodies = records.map { $0.record.encoded().text }
        let due = now.timeIntervalSince1970
        return try withState { state in
            var replaced = 0
            for (item, body) in zip(records, bodies) {
                let recordID = Text(item.record.recordID)
                guard let index = state.recordByID[recordID],
                    Text(state.records[index].dedupeKey) == Text(item.record.dedupeKey)
                else { continue }
                state.records[index].body = body
                state.records[index].quarantinedBytes = item.record.isQuarantined ? body.utf8.count : nil
                replaced += 1
                for sink in item.sinks.map(Text.init) {
                    // A new row, not the old one: a worker delivering the old version right now resolves the old
                    // row's id, so this one still goes out. It keeps the old row's queueing time and place.
                    let old = state.outboxByKey[RowKey(sink: sink, recordID: recordID)].flatMap {
                        state.removeOutboxRow(id: $0)
                    }
                    state.addOutboxRow(
                        sink: sink, recordID: recordID, due: due, createdAt: old?.createdAt ?? due,
                        lane: item.record.deliveryLane.map(Text.init), position: old?.order)
                }
            }
            return replaced
        }
    }

    public func trimQuarantined(provider: String, maxBytes: Int) async throws -> QuarantineTrim {
        try withState { state in
            let provider = Text(provider)
            let quarantined = state.records.indices.filter {
                state.records[$0].quarantinedBytes != nil && Text(state.records[$0].provider) == provider
            }
            var kept = quarantined.reduce(0) { $0 + state.records[$1].quarantinedBytes! }
            let waiting = state.awaitedBySinks
            var dropped = Set<Int>()
            for index in quarantined where kept > maxBytes {
                let record = state.records[index]
                guard !waiting.contains(Text(record.recordID)) else { continue }
                dropped.insert(index)
                kept -= record.quarantinedBytes!
            }
            state.removeRecords(at: dropped)
            return QuarantineTrim(dropped: dropped.count, keptBytes: kept)
        }
    }

    public func ping() async throws {
        try withState { _ in }
    }
}
