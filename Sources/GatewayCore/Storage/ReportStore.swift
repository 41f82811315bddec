import Foundation

/// What the reports read of the stored records: a few fields of each install, purchase,
/// refund and postback. A backend reads them out of the stored bodies in the database, so
/// that a report over millions of records neither decodes every body, raw payload and
/// all, in the process, nor asks for the records it leaves out.
public protocol ReportStore: Sendable {
    /// Scans up to `limit` stored records after `cursor`, in storage order, and gives back
    /// those of `kinds` (and of `appID`, when given) as ``AttributionRecord/reportView``
    /// shows them, a body that cannot be read left out. A page that scanned nothing is the end.
    func reportRecords(appID: String?, kinds: Set<RecordKind>, after cursor: Int64, limit: Int) async throws
        -> ReportPage
}

/// One page of ``ReportStore/reportRecords(appID:kinds:after:limit:)``.
public struct ReportPage: Sendable {
    /// The records of the kinds and app asked for, in storage order.
    public var records: [AttributionRecord]
    /// How many stored records the page went through, those left out included.
    public var scanned: Int
    /// Where the next page starts.
    public var cursor: Int64

    public init(records: [AttributionRecord], scanned: Int, cursor: Int64) {
        self.records = records
        self.scanned = scanned
        self.cursor = cursor
    }
}

/// A store that keeps the keyword report's facts as records are written, changed and
/// deleted (``KeywordReport/indexedFacts()``), so that a report sums them in the database
/// instead of reading every record: its memory then grows with its lines, not its users.
///
/// Records linked by a user id, a device or a transaction (``KeywordReport/indexNodes(of:)``)
/// form a group, and a group's facts are made again from its records whenever one of them
/// changes; groups apart add up to the whole report.
public protocol ReportIndexStore: ReportStore {
    /// Brings into the index the oldest `limit` entries of its queue (records written,
    /// changed or deleted since); returns how many it took and the id of the last, nil when
    /// none was waiting.
    func indexReport(limit: Int) async throws -> ReportIndexBatch?

    /// How many entries wait for ``indexReport(limit:)``, and the id of the newest.
    func reportIndexQueue() async throws -> (waiting: Int, newest: Int64?)

    /// The lines of the indexed facts that `report`'s filters admit (of `appID`'s records
    /// only, when given), with those of `live` added: records not stored (tokens Apple
    /// has not answered), counted with the records they link to.
    func indexedReport(_ report: KeywordReport, appID: String?, live: [AttributionRecord], days: DailySeries?)
        async throws -> KeywordReport.Sums

    /// `report` with the indexed postbacks of its period added (of `appID`, when given):
    /// postbacks join no group, one row each (``SKANReport/indexedPostback(_:)``).
    func indexedPostbacks(_ report: SKANReport, appID: String?) async throws -> SKANReport
}

/// What one ``ReportIndexStore/indexReport(limit:)`` took from the queue.
public struct ReportIndexBatch: Sendable, Equatable {
    /// Entries taken.
    public let taken: Int
    /// The id of the last: entries are taken in the order they were queued.
    public let last: Int64

    /// How many entries a batch takes unless told otherwise: a batch is one write
    /// transaction, which ingest waits for on SQLite.
    public static let standardSize = 2000

    public init(taken: Int, last: Int64) {
        self.taken = taken
        self.last = last
    }
}

extension ReportIndexStore {
    /// Indexes every entry queued before the call, in batches of `batch`, telling `progress`
    /// the entries taken and how many were waiting: a record acknowledged before a report
    /// is in it. Entries queued meanwhile may wait for the next.
    public func catchUpReportIndex(
        batch: Int = ReportIndexBatch.standardSize, progress: (_ taken: Int, _ waiting: Int) -> Void = { _, _ in }
    )
        async throws
    {
        let queue = try await reportIndexQueue()
        guard let newest = queue.newest else { return }
        var taken = 0
        while let done = try await indexReport(limit: batch) {
            taken += done.taken
            progress(min(taken, queue.waiting), queue.waiting)
            if done.last >= newest { return }
        }
    }
}
