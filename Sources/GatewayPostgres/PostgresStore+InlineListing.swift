import Foundation
import GatewayCore
import PostgresNIO
import Synchronization

/// Sinks whose delivery is a row in a list of the store's own database (a `view: true`
/// postgres sink's `attribution_records_rows`), written by the statement that stores the
/// record instead of through their outboxes.
///
/// Through the outbox, each record costs an outbox row written, claimed, read back and
/// deleted, and a PostgreSQL import left millions of them for a server to drain. Listed
/// by the statement that stores the record, it is in the view the moment its answer is
/// `2xx`, and so is a record a resolved token stores. Should the list refuse them, the
/// records are written again with outbox rows, so the sinks' workers deliver them; replays
/// and late versions always go through the outbox.
final class InlineListings: Sendable {
    private let state = Mutex<(sinks: Set<String>, table: String?)>(([], nil))
    private let observer = Mutex<(any InlineDeliveryObserver)?>(nil)

    var current: (sinks: Set<String>, table: String?) { state.withLock { $0 } }

    func add(sink: String, table: String) {
        precondition(table.allSatisfy { $0.isLetter || $0 == "_" }, "a list's table is a plain name")
        state.withLock { $0 = ($0.sinks.union([sink]), table) }
    }

    func remove(sink: String) {
        state.withLock { _ = $0.sinks.remove(sink) }
    }

    func observe(_ observer: any InlineDeliveryObserver) {
        self.observer.withLock { $0 = observer }
    }

    /// What writes did for the listed sinks, to report once they committed.
    struct Outcome {
        var delivered: [String: [(record: AttributionRecord, queuedAt: Date)]] = [:]
        var fellBack: [String: Int] = [:]

        mutating func add(_ other: Outcome) {
            delivered.merge(other.delivered, uniquingKeysWith: +)
            fellBack.merge(other.fellBack, uniquingKeysWith: +)
        }
    }

    func report(_ outcome: Outcome) {
        guard let observer = observer.withLock({ $0 }) else { return }
        for (sink, records) in outcome.delivered where !records.isEmpty {
            observer.delivered(sink: sink, records: records)
        }
        for (sink, count) in outcome.fellBack where count > 0 { observer.fellBack(sink: sink, count: count) }
    }
}

extension PostgresStore: InlineDeliveryStore {
    /// Lists `sink`'s records in `table` (a `seq` column, the records' own) with each
    /// commit that stores them, from now on.
    public func listInline(sink: String, table: String) {
        inlineListings.add(sink: sink, table: table)
    }

    public func stopDeliveringInline(sink: String) {
        inlineListings.remove(sink: sink)
    }

    public func observeInline(_ observer: any InlineDeliveryObserver) {
        inlineListings.observe(observer)
    }

    public var inlineSinkNames: Set<String> { inlineListings.current.sinks }

    /// Stores `batch` with its listed records' places written by the same statement; when
    /// the list refuses them (it was dropped by hand), stores it again with outbox rows for
    /// every sink, so that the sinks' workers deliver what the list did not take.
    func ingestListing(_ batch: [RoutedRecord], _ listed: InlineListed, queuedAt: Date) async throws
        -> [IngestResult]
    {
        try await listingOrQueueing(into: listed.table) { listing in
            let results = try await write(batch, queuedAt: queuedAt, list: listing ? listed : nil)
            return (results, listed.outcome(of: batch, results, queuedAt: queuedAt, fellBack: !listing))
        }
    }

    /// Runs `write` listing the records of the sinks listed in `table`; when the list
    /// refuses them, runs it again queueing them in the sinks' outboxes instead. Reports
    /// what the write that committed did for those sinks.
    func listingOrQueueing<T>(
        into table: String?, _ write: (_ listing: Bool) async throws -> (T, InlineListings.Outcome)
    ) async throws -> T {
        do {
            let (result, outcome) = try await write(true)
            inlineListings.report(outcome)
            return result
        } catch {
            guard let table, let refusal = Self.listRefusal(error) else { throw error }
            logger.warning(
                "records could not be listed with their commit; queued in the sinks' outboxes",
                metadata: ["table": "\(table)", "error": "\(Self.describe(refusal))"])
            let (result, outcome) = try await write(false)
            inlineListings.report(outcome)
            return result
        }
    }

    /// The server's refusal of a statement (also inside a failed transaction) that writing
    /// again without the list avoids: a missing table or column, a right taken away, or a
    /// constraint or trigger of the list's. A lost connection, a deadlock or a timeout is
    /// the store's own failure, answered as any other.
    static func listRefusal(_ error: any Error) -> PSQLError? {
        if let error = error as? PostgresTransactionError, let inner = error.closureError {
            return listRefusal(inner)
        }
        guard let error = error as? PSQLError, let state = error.serverInfo?[.sqlState] else { return nil }
        return state.hasPrefix("42") || state.hasPrefix("23") ? error : nil
    }
}

/// A batch as the store writes it when some of its sinks are listed inline: each record's
/// other sinks for the outbox, and whether it is listed.
struct InlineListed: Sendable {
    let table: String
    let listedSinks: [[String]]
    let outboxBatch: [RoutedRecord]
    var flags: [Bool] { listedSinks.map { !$0.isEmpty } }

    /// Nil when no record of `batch` goes to a listed sink.
    init?(_ batch: [RoutedRecord], listings: (sinks: Set<String>, table: String?)) {
        guard let table = listings.table, batch.contains(where: { !listings.sinks.isDisjoint(with: $0.sinks) })
        else { return nil }
        self.table = table
        listedSinks = batch.map { $0.sinks.filter(listings.sinks.contains) }
        outboxBatch = batch.map {
            RoutedRecord(record: $0.record, sinks: $0.sinks.filter { !listings.sinks.contains($0) })
        }
    }

    /// The statement's last part: the places of the records `source` gives (a `seq` column)
    /// inserted in the list.
    func insertion(from source: String) -> String {
        ", listed AS (INSERT INTO \(table) (seq) SELECT seq FROM \(source) ON CONFLICT DO NOTHING)"
    }

    /// What a write of `batch` that gave `results` did for the listed sinks: each record it
    /// stored (not a duplicate, and once) listed, or queued in their outboxes (`fellBack`).
    func outcome(of batch: [RoutedRecord], _ results: [IngestResult], queuedAt: Date, fellBack: Bool)
        -> InlineListings.Outcome
    {
        var outcome = InlineListings.Outcome()
        var seen: Set<String> = []
        for (index, result) in results.enumerated() {
            guard case .stored(let id) = result, seen.insert(id).inserted else { continue }
            for sink in listedSinks[index] {
                if fellBack {
                    outcome.fellBack[sink, default: 0] += 1
                } else {
                    outcome.delivered[sink, default: []].append((batch[index].record, queuedAt))
                }
            }
        }
        return outcome
    }
}
