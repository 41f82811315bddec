import Foundation

/// Outboxes.
extension InMemoryStore {
    public func dueEntries(sink: String, now: Date, limit: Int, laneOrdered: Bool) async throws -> [OutboxEntry] {
        let sink = Text(sink)
        let at = now.timeIntervalSince1970
        let due = try withState { state in
            let fronts = laneOrdered ? state.laneFronts(of: sink) : [:]
            return Array(
                state.outbox.values.filter { $0.sink == sink && $0.nextAttemptAt <= at && !$0.isBehind(fronts) }
                    .sorted { ($0.nextAttemptAt, $0.id) < ($1.nextAttemptAt, $1.id) }
                    .compactMap { row in
                        state.recordByID[row.recordID].map { (row: row, body: state.records[$0].body) }
                    }
                    .prefix(Self.rows(limit)))
        }
        // A body that cannot be read comes back marked for the worker to dead-letter, as from the SQLite store.
        return due.map { row, body in
            do {
                var entry = OutboxEntry(
                    id: row.id, record: try AttributionRecord(jsonData: Data(body.utf8)), attempts: row.attempts,
                    queuedAt: Date(timeIntervalSince1970: row.createdAt))
                entry.wasBeingSent = row.sendingSince != nil
                return entry
            } catch {
                return .unreadable(
                    id: row.id, attempts: row.attempts, reason: "the stored record cannot be read: \(error)")
            }
        }
    }

    public func nextDueDate(sink: String, laneOrdered: Bool) async throws -> Date? {
        let sink = Text(sink)
        return try withState { state in
            let fronts = laneOrdered ? state.laneFronts(of: sink) : [:]
            return state.outbox.values.filter { $0.sink == sink && !$0.isBehind(fronts) }.map(\.nextAttemptAt).min()
        }.map { Date(timeIntervalSince1970: $0) }
    }

    public func holdLanes(sink: String, behind heads: [(id: Int64, until: Date)]) async throws {
        guard !heads.isEmpty else { return }
        let sink = Text(sink)
        try withState { state in
            for head in heads {
                // The head's lane whatever its sink, as the SQLite store's subquery reads it; none holds nothing.
                guard let lane = state.outbox[head.id]?.lane else { continue }
                let until = head.until.timeIntervalSince1970
                let held = state.outbox.values.filter { $0.sink == sink && $0.id != head.id && $0.lane == lane }
                for row in held { state.outbox[row.id]?.nextAttemptAt = max(row.nextAttemptAt, until) }
            }
        }
    }

    /// The sink passed is not checked, as the SQLite store does not: ids name rows.
    public func resolve(sink: String, _ resolutions: [OutboxResolution], now: Date) async throws {
        guard !resolutions.isEmpty else { return }
        let failedAt = Date(timeIntervalSince1970: now.timeIntervalSince1970)
        try withState { state in
            for resolution in resolutions {
                switch resolution {
                case .delivered(let id):
                    state.removeOutboxRow(id: id)
                case .retry(let id, let attempts, let at, let error):
                    guard var row = state.outbox[id] else { continue }
                    row.attempts = attempts
                    row.nextAttemptAt = at.timeIntervalSince1970
                    row.lastError = error
                    row.sendingSince = nil
                    state.outbox[id] = row
                case .deadLetter(let id, let attempts, let error):
                    guard let row = state.removeOutboxRow(id: id) else { continue }
                    // SQLite's `INSERT OR REPLACE`: the sink's dead letter of the record gives way to a new one,
                    // under a new id.
                    state.removeDeadLetter(key: row.key)
                    state.lastDeadLetterID += 1
                    state.deadLetters[state.lastDeadLetterID] = DeadLetter(
                        id: state.lastDeadLetterID, sink: row.sink.string, recordID: row.recordID.string,
                        attempts: attempts, error: error, failedAt: failedAt)
                    state.deadLetterByKey[row.key] = state.lastDeadLetterID
                }
            }
        }
    }

    /// One process's memory: its rows are never leased, and a batch cut short is due as it was.
    public func unclaim(sink: String, _ entries: [OutboxEntry]) async throws {}

    public func markSending(id: Int64, now: Date) async throws {
        try withState { state in state.outbox[id]?.sendingSince = now.timeIntervalSince1970 }
    }

    public func outboxStats() async throws -> [String: OutboxStats] {
        try withState { state in
            var stats: [String: OutboxStats] = [:]
            for row in state.outbox.values {
                var sink = stats[row.sink.string] ?? OutboxStats(depth: 0, oldest: nil)
                sink.depth += 1
                let createdAt = Date(timeIntervalSince1970: row.createdAt)
                sink.oldest = min(sink.oldest ?? createdAt, createdAt)
                stats[row.sink.string] = sink
            }
            return stats
        }
    }

    public func enqueue(recordIDs: [String], sink: String, now: Date) async throws -> Int {
        guard !recordIDs.isEmpty else { return 0 }
        let sink = Text(sink)
        let at = now.timeIntervalSince1970
        return try withState { state in
            var queued = 0
            for recordID in recordIDs.map(Text.init) {
                guard let index = state.recordByID[recordID] else { continue }
                let lane = state.records[index].lane
                if state.addOutboxRow(sink: sink, recordID: recordID, due: at, createdAt: at, lane: lane) {
                    queued += 1
                }
            }
            // A dead letter of a record queued again is being retried, as `dlq retry` does: left, a later
            // `dlq retry --all` would send the record once more.
            for recordID in recordIDs.map(Text.init) {
                let key = RowKey(sink: sink, recordID: recordID)
                if state.outboxByKey[key] != nil { state.removeDeadLetter(key: key) }
            }
            return queued
        }
    }
}

/// Dead letters.
extension InMemoryStore {
    /// The SQLite store's dead-letter `WHERE`: nil matches every dead letter, an empty list none.
    struct DeadLetterFilter {
        let ids: Set<Int64>?
        let sink: Text?
        let among: Set<Text>?

        init(ids: [Int64]?, sink: String?, among: [String]? = nil) {
            self.ids = ids.map(Set.init)
            self.sink = sink.map(Text.init)
            self.among = among.map { Set($0.map(Text.init)) }
        }

        func matches(_ letter: DeadLetter) -> Bool {
            let sink = Text(letter.sink)
            return (ids?.contains(letter.id) ?? true) && (self.sink.map { $0 == sink } ?? true)
                && (among?.contains(sink) ?? true)
        }
    }

    public func deadLetters(sink: String?, ids: [Int64]?, limit: Int) async throws -> [DeadLetter] {
        let filter = DeadLetterFilter(ids: ids, sink: sink)
        return try withState { state in
            Array(state.deadLetters.values.filter(filter.matches).sorted { $0.id > $1.id }.prefix(Self.rows(limit)))
        }
    }

    public func deadLetterCounts(ids: [Int64]?) async throws -> [String: Int] {
        let filter = DeadLetterFilter(ids: ids, sink: nil)
        return try withState { state in
            var counts: [String: Int] = [:]
            for letter in state.deadLetters.values where filter.matches(letter) { counts[letter.sink, default: 0] += 1 }
            return counts
        }
    }

    public func retryDeadLetters(ids: [Int64]?, sink: String?, among sinks: [String]?, now: Date) async throws -> Int {
        let filter = DeadLetterFilter(ids: ids, sink: sink, among: sinks)
        let at = now.timeIntervalSince1970
        return try withState { state in
            // In the order SQLite reads them, by its (sink, record) index: the order of the new rows' ids.
            let matching = state.deadLetters.values.filter(filter.matches).sorted {
                (Text($0.sink), Text($0.recordID)) < (Text($1.sink), Text($1.recordID))
            }
            for letter in matching {
                let recordID = Text(letter.recordID)
                guard let index = state.recordByID[recordID] else { continue }
                let lane = state.records[index].lane
                state.addOutboxRow(sink: Text(letter.sink), recordID: recordID, due: at, createdAt: at, lane: lane)
            }
            for letter in matching { state.removeDeadLetter(id: letter.id) }
            return matching.count
        }
    }

    public func dropDeadLetters(ids: [Int64]?, sink: String?) async throws -> Int {
        let filter = DeadLetterFilter(ids: ids, sink: sink)
        return try withState { state in
            let matching = state.deadLetters.values.filter(filter.matches)
            for letter in matching { state.removeDeadLetter(id: letter.id) }
            return matching.count
        }
    }
}

extension InMemoryStore.State {
    /// The first place of each lane among `sink`'s rows, for ``InMemoryStore/OutboxRow/isBehind(_:)``.
    func laneFronts(of sink: Text) -> [Text: Int64] {
        var fronts: [Text: Int64] = [:]
        for row in outbox.values where row.sink == sink {
            guard let lane = row.lane else { continue }
            fronts[lane] = min(fronts[lane] ?? .max, row.order)
        }
        return fronts
    }

    mutating func removeDeadLetter(id: Int64) {
        guard let letter = deadLetters.removeValue(forKey: id) else { return }
        deadLetterByKey[InMemoryStore.RowKey(sink: Text(letter.sink), recordID: Text(letter.recordID))] = nil
    }

    mutating func removeDeadLetter(key: InMemoryStore.RowKey) {
        guard let id = deadLetterByKey[key] else { return }
        removeDeadLetter(id: id)
    }
}
