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
}
