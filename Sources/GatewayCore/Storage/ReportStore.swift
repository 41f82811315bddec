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
    /// Brings up to `limit` of the records written, changed or deleted since into the
    /// index; returns how many it took, 0 when none was waiting.
    func indexReport(limit: Int) async throws -> Int

    /// How many records wait for ``indexReport(limit:)``.
    func reportIndexBacklog() async throws -> Int

    /// The lines of the indexed facts that `report`'s filters admit (of `appID`'s records
    /// only, when given), with those of `live` added: records not stored (tokens Apple
    /// has not answered), counted with the records they link to.
    func indexedReport(_ report: KeywordReport, appID: String?, live: [AttributionRecord], days: DailySeries?)
        async throws -> KeywordReport.Sums

    /// `report` with the indexed postbacks of its period added (of `appID`, when given):
    /// postbacks join no group, one row each (``SKANReport/indexedPostback(_:)``).
    func indexedPostbacks(_ report: SKANReport, appID: String?) async throws -> SKANReport
}
