import GRDB
import GatewayCore
import Synchronization

/// A sink whose rows live in the store's own database file (the SQLite sink's default),
/// written in the same transaction as the record instead of through its outbox.
///
/// Through the outbox, each record was queued, read back, parsed, written again and
/// resolved: about 90 µs of the 200 µs an iAd request cost (`Benchmarks/run`). Written
/// with the record, the sink's row is there the moment the answer is `2xx`. Should the
/// row fail (its statement alone is undone), the record goes to the sink's outbox as
/// before, so its worker retries or dead-letters it; replays and late versions always go
/// through the outbox.
public struct InlineDelivery: Sendable {
    /// The sink's name, as routes name it.
    public let sink: String
    /// One statement that writes one record's row.
    public let sql: String
    /// The statement's arguments for a record, made before the write lock is taken.
    public let arguments: @Sendable (AttributionRecord) throws -> StatementArguments

    public init(
        sink: String, sql: String, arguments: @escaping @Sendable (AttributionRecord) throws -> StatementArguments
    ) {
        self.sink = sink
        self.sql = sql
        self.arguments = arguments
    }
}

/// A sink that can be written in the store's transactions when it shares its file.
public protocol InlineDeliverable {
    /// Its inline delivery into `store`, or nil when its rows live elsewhere.
    func inlineDelivery(sinkName: String, into store: SQLiteStore) -> InlineDelivery?
}

/// A record ready to be written: its stored body and, per inline sink it is routed to,
/// that sink's statement arguments.
struct PreparedRecord: Sendable {
    let body: String
    let inline: [String: StatementArguments]
}

/// What one commit did for inline sinks: rows written, and sinks whose row failed and
/// went to their outbox instead (their workers must be woken).
struct InlineOutcome: Sendable {
    var delivered: [(sink: String, record: AttributionRecord)] = []
    /// Per sink, how many rows failed and went to its outbox.
    var queued: [String: Int] = [:]

    mutating func add(_ other: InlineOutcome) {
        delivered += other.delivered
        queued.merge(other.queued, uniquingKeysWith: +)
    }
}

/// The inline sinks of one store, and what to tell when rows were written.
final class InlineSinks: Sendable {
    /// The report closure in a class: a closure kept directly in a Mutex is re-wrapped in
    /// reabstraction thunks on every `withLock`, and the chain grew with each commit (the
    /// first try of this spent 58% of its CPU walking it).
    final class Report: Sendable {
        let call: @Sendable (_ sink: String, _ records: [AttributionRecord]) -> Void
        init(_ call: @escaping @Sendable (_ sink: String, _ records: [AttributionRecord]) -> Void) { self.call = call }
    }

    /// The same, for a sink whose rows went to its outbox instead.
    final class Fallback: Sendable {
        let call: @Sendable (_ sink: String, _ count: Int) -> Void
        init(_ call: @escaping @Sendable (_ sink: String, _ count: Int) -> Void) { self.call = call }
    }

    private let deliveries = Mutex<[String: InlineDelivery]>([:])
    private let delivered = Mutex<Report?>(nil)
    private let fallback = Mutex<Fallback?>(nil)

    var all: [String: InlineDelivery] { deliveries.withLock { $0 } }

    func add(_ delivery: InlineDelivery) {
        deliveries.withLock { $0[delivery.sink] = delivery }
    }

    func onDelivered(_ report: @escaping @Sendable (_ sink: String, _ records: [AttributionRecord]) -> Void) {
        delivered.withLock { $0 = Report(report) }
    }

    func onFallback(_ call: @escaping @Sendable (_ sink: String, _ count: Int) -> Void) {
        fallback.withLock { $0 = Fallback(call) }
    }

    func report(_ outcome: InlineOutcome) {
        if !outcome.delivered.isEmpty, let report = delivered.withLock({ $0 }) {
            for (sink, group) in Dictionary(grouping: outcome.delivered, by: \.sink) {
                report.call(sink, group.map(\.record))
            }
        }
        if !outcome.queued.isEmpty, let fallback = fallback.withLock({ $0 }) {
            for (sink, count) in outcome.queued { fallback.call(sink, count) }
        }
    }
}

extension SQLiteStore {
    /// Writes `delivery.sink`'s rows in the store's own transactions from now on.
    public func deliverInline(_ delivery: InlineDelivery) {
        inlineSinks.add(delivery)
    }

    /// Called after a commit with the records each inline sink received in it (metrics).
    public func onInlineDelivered(
        _ report: @escaping @Sendable (_ sink: String, _ records: [AttributionRecord]) -> Void
    ) {
        inlineSinks.onDelivered(report)
    }

    /// Called after a commit for each inline sink whose rows failed and went to its
    /// outbox, with how many.
    public func onInlineFallback(_ call: @escaping @Sendable (_ sink: String, _ count: Int) -> Void) {
        inlineSinks.onFallback(call)
    }

    /// The sinks written inline, whose workers need no wake-up for new records.
    public var inlineSinkNames: Set<String> { Set(inlineSinks.all.keys) }

    /// Bodies and inline arguments, made before the write lock is taken. A record whose
    /// arguments cannot be made goes to that sink's outbox, as a failed row would.
    func prepare(_ batch: [RoutedRecord], inline: [String: InlineDelivery]) -> [PreparedRecord] {
        batch.map { item in
            var arguments: [String: StatementArguments] = [:]
            for sink in item.sinks {
                if let delivery = inline[sink] { arguments[sink] = try? delivery.arguments(item.record) }
            }
            return PreparedRecord(body: String(decoding: item.record.jsonData(), as: UTF8.self), inline: arguments)
        }
    }
}
