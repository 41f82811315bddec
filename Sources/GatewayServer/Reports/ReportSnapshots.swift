import Foundation
import GatewayCore
import Synchronization

/// Dashboard computations kept for the links of the page that showed them. Opening a line,
/// going back up and downloading the CSV show the numbers the page showed, at once, rather
/// than computing the report again each time (over millions of records, minutes each).
/// A view loaded without `as_of` is always computed afresh.
final class ReportSnapshots: Sendable {
    /// One computation of the report: its query, when it began, and what it gave.
    struct Snapshot: Sendable {
        let query: KeywordReportQuery
        let takenAt: Date
        let rows: [KeywordReport.Row]
        let daily: DailySeries?
        let postbacks: SKANReport?
    }

    /// How many are kept, the latest first: a few tabs' explorations.
    static let capacity = 8
    /// How many report lines they may hold together, a few hundred bytes each: an account
    /// with tens of thousands of keywords keeps fewer pages rather than more memory. The
    /// latest is kept whatever its size, for its own links.
    static let lineBudget = 100_000
    /// How long a page's links show its numbers; later they are computed again.
    static let maxAge: TimeInterval = 3600

    private let held = Mutex<[(id: String, snapshot: Snapshot)]>([])

    /// Keeps `snapshot` and gives back its id, for the `as_of` of the page's links.
    func keep(_ snapshot: Snapshot) -> String {
        let id = (0..<2).map { _ in String(format: "%016llx", UInt64.random(in: .min ... .max)) }.joined()
        held.withLock { held in
            held.removeAll { snapshot.takenAt.timeIntervalSince($0.snapshot.takenAt) > Self.maxAge }
            held.insert((id, snapshot), at: 0)
            var lines = 0
            var kept = 0
            for entry in held {
                lines += entry.snapshot.rows.count
                if kept > 0 && (kept == Self.capacity || lines > Self.lineBudget) { break }
                kept += 1
            }
            held.removeLast(held.count - kept)
        }
        return id
    }

    /// The snapshot `id` names, if it is still kept, not older than ``maxAge`` and of the
    /// same query: a link whose filters were edited by hand is computed for what it asks.
    func find(_ id: String, query: KeywordReportQuery, now: Date = Date()) -> Snapshot? {
        held.withLock { held in
            held.removeAll { now.timeIntervalSince($0.snapshot.takenAt) > Self.maxAge }
            return held.first { $0.id == id && $0.snapshot.query == query }?.snapshot
        }
    }

    /// Whether `text` could be an id ``keep(_:)`` gave: 32 lower-case hex digits.
    static func isID(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }
}
