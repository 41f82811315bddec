import Foundation
import GatewayCore
import Testing

@testable import GatewayServer

/// The dashboard's kept computations: found by id for the same query only, for an hour,
/// and never more than a few pages or lines' worth.
@Suite struct ReportSnapshotsTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    static func snapshot(_ app: String, lines: Int = 1, at time: Date = start) -> ReportSnapshots.Snapshot {
        ReportSnapshots.Snapshot(
            query: KeywordReportQuery(appID: app), takenAt: time,
            rows: Array(repeating: KeywordReport.emptyRow, count: lines), daily: nil, postbacks: nil)
    }

    @Test func aSnapshotIsFoundForItsOwnQueryForAnHour() {
        let snapshots = ReportSnapshots()
        let id = snapshots.keep(Self.snapshot("1"))
        #expect(ReportSnapshots.isID(id))
        let query = KeywordReportQuery(appID: "1")
        #expect(snapshots.find(id, query: query, now: Self.start + 3600)?.query == query)
        #expect(snapshots.find(id, query: query, now: Self.start + 3601) == nil)
        #expect(snapshots.find(id, query: KeywordReportQuery(appID: "2"), now: Self.start) == nil)
        #expect(snapshots.find(id, query: KeywordReportQuery(appID: "1", country: "US"), now: Self.start) == nil)
        #expect(snapshots.find(String(repeating: "0", count: 32), query: query, now: Self.start) == nil)
        #expect(!ReportSnapshots.isID("latest") && !ReportSnapshots.isID(id.uppercased()))
    }

    @Test func aSnapshotPastTheHourIsDroppedWhenAnotherIsKept() {
        let snapshots = ReportSnapshots()
        let old = snapshots.keep(Self.snapshot("1"))
        _ = snapshots.keep(Self.snapshot("2", at: Self.start + 3601))
        #expect(snapshots.find(old, query: KeywordReportQuery(appID: "1"), now: Self.start) == nil)
    }

    @Test func theOldestGoPastEightPagesOrTheLineBudget() {
        let snapshots = ReportSnapshots()
        let ids = (0..<10).map { snapshots.keep(Self.snapshot("\($0)")) }
        func kept(_ index: Int) -> Bool {
            snapshots.find(ids[index], query: KeywordReportQuery(appID: "\(index)"), now: Self.start) != nil
        }
        #expect((0..<10).map(kept) == [false, false] + Array(repeating: true, count: 8))

        // A page of more lines than the budget stays, alone, for its own links.
        let large = snapshots.keep(Self.snapshot("large", lines: ReportSnapshots.lineBudget + 1))
        #expect(snapshots.find(large, query: KeywordReportQuery(appID: "large"), now: Self.start) != nil)
        #expect(!(0..<10).contains(where: kept))
        // The next small one fits beside it only while the two stay in the budget: it does not.
        let small = snapshots.keep(Self.snapshot("small"))
        #expect(snapshots.find(small, query: KeywordReportQuery(appID: "small"), now: Self.start) != nil)
        #expect(snapshots.find(large, query: KeywordReportQuery(appID: "large"), now: Self.start) == nil)
    }
}
