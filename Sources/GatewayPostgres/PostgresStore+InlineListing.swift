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
/// `2xx`. Should that statement fail, the records are written again with outbox rows, so
/// the sinks' workers deliver them; replays and late versions always go through the outbox.
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

    func report(delivered: [String: [(record: AttributionRecord, queuedAt: Date)]], fellBack: [String: Int]) {
        guard let observer = observer.withLock({ $0 }) else { return }
        for (sink, records) in delivered where !records.isEmpty { observer.delivered(sink: sink, records: records) }
        for (sink, count) in fellBack where count > 0 { observer.fellBack(sink: sink, count: count) }
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
    /// that statement fails (the list was dropped by hand), stores it again with outbox rows
    /// for every sink, so that the sinks' workers deliver what the list did not take.
    func ingestListing(_ batch: [RoutedRecord], _ listed: InlineListed, queuedAt: Date) async throws
        -> [IngestResult]
    {
        var delivered: [String: [(record: AttributionRecord, queuedAt: Date)]] = [:]
        var fellBack: [String: Int] = [:]
        let results: [IngestResult]
        do {
            results = try await write(batch, queuedAt: queuedAt, list: listed)
            for (index, sinks) in listed.stored(results) {
                for sink in sinks { delivered[sink, default: []].append((batch[index].record, queuedAt)) }
            }
        } catch {
            guard let refusal = Self.serverRefusal(error) else { throw error }
            logger.warning(
                "records could not be listed with their commit; queued in the sinks' outboxes",
                metadata: ["table": "\(listed.table)", "error": "\(Self.describe(refusal))"])
            results = try await write(batch, queuedAt: queuedAt, list: nil)
            for (_, sinks) in listed.stored(results) {
                for sink in sinks { fellBack[sink, default: 0] += 1 }
            }
        }
        inlineListings.report(delivered: delivered, fellBack: fellBack)
        return results
    }

    /// The server's refusal of a statement, also inside a failed transaction: what writing
    /// again without the list may avoid, unlike a lost connection.
    static func serverRefusal(_ error: any Error) -> PSQLError? {
        if let error = error as? PSQLError { return error.serverInfo == nil ? nil : error }
        if let error = error as? PostgresTransactionError, let inner = error.closureError {
            return serverRefusal(inner)
        }
        return nil
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

    /// Each record stored by this write (not a duplicate, and once), by its place in the
    /// batch, with its listed sinks.
    func stored(_ results: [IngestResult]) -> [(index: Int, sinks: [String])] {
        var seen: Set<String> = []
        return results.enumerated().compactMap { index, result in
            guard case .stored(let id) = result, seen.insert(id).inserted, !listedSinks[index].isEmpty else {
                return nil
            }
            return (index, listedSinks[index])
        }
    }
}
