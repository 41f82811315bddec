import Foundation

extension InMemoryStore {
    public func dropRawPayloads(receivedBefore before: Date, after cursor: RetentionCursor, limit: Int) async throws
        -> (dropped: Int, cursor: RetentionCursor?)
    {
        let cutoff = before.timeIntervalSince1970
        return try withState { state in
            let page = state.records.indices.filter { index in
                let record = state.records[index]
                return record.receivedAt < cutoff
                    && (record.receivedAt, record.seq) > (cursor.receivedAt, cursor.seq)
            }
            .sorted {
                (state.records[$0].receivedAt, state.records[$0].seq) < (
                    state.records[$1].receivedAt, state.records[$1].seq
                )
            }
            .prefix(Self.rows(limit))
            guard let last = page.last else { return (0, nil) }
            var dropped = 0
            for index in page {
                if let body = AttributionRecord.bodyWithoutRaw(state.records[index].body) {
                    state.records[index].body = body
                    dropped += 1
                }
            }
            return (dropped, RetentionCursor(receivedAt: state.records[last].receivedAt, seq: state.records[last].seq))
        }
    }

    public func deleteRecords(receivedBefore before: Date, limit: Int) async throws -> Int {
        let cutoff = before.timeIntervalSince1970
        return try withState { state in
            let waiting = state.awaitedBySinks.union(
                state.sdkUsers.values.compactMap { $0.attributionRecordID.map(Text.init) })
            let chosen = state.records.indices.filter { index in
                state.records[index].receivedAt < cutoff && !waiting.contains(Text(state.records[index].recordID))
            }
            .sorted {
                (state.records[$0].receivedAt, state.records[$0].seq) < (
                    state.records[$1].receivedAt, state.records[$1].seq
                )
            }
            .prefix(Self.rows(limit))
            state.removeRecords(at: Set(chosen))
            return chosen.count
        }
    }
}

extension InMemoryStore.State {
    /// The records a sink still waits for: in an outbox, or dead-lettered.
    var awaitedBySinks: Set<InMemoryStore.Text> {
        Set(outbox.values.map(\.recordID) + deadLetters.values.map { InMemoryStore.Text($0.recordID) })
    }

    /// Removes the records at `indices`, with their dedupe keys, and renumbers the lookups.
    mutating func removeRecords(at indices: Set<Int>) {
        guard !indices.isEmpty else { return }
        records = records.indices.filter { !indices.contains($0) }.map { records[$0] }
        recordByID = [:]
        recordByKey = [:]
        for (index, record) in records.enumerated() {
            recordByID[Text(record.recordID)] = index
            recordByKey[Text(record.dedupeKey)] = index
        }
    }
}
