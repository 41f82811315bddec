import Foundation

extension InMemoryStore {
    public func reportRecords(appID: String?, kinds: Set<RecordKind>, after cursor: Int64, limit: Int) async throws
        -> ReportPage
    {
        let page = try withState { state in
            Array(state.records[state.firstRecord(after: cursor)...].prefix(Self.rows(limit)))
        }
        let records = page.compactMap { row -> AttributionRecord? in
            guard appID.map({ Text($0) == row.appID.map(Text.init) }) ?? true,
                let record = try? AttributionRecord(jsonData: Data(row.body.utf8)), kinds.contains(record.kind)
            else { return nil }
            return record.reportView
        }
        return ReportPage(records: records, scanned: page.count, cursor: page.last?.seq ?? cursor)
    }
}
