import Foundation
import GRDB
import GatewayCompactRaw
import GatewayCore
import Synchronization

/// A sink whose rows live in the store's own database file (the SQLite sink's default),
/// written in the same transaction as the record instead of through its outbox.
///
/// Through the outbox, each record is queued, read back, parsed, written again and
/// resolved: a large share of what an iAd request costs. Written
/// with the record, the sink's row is there the moment the answer is `2xx`. Should the
/// row fail (its statement alone is undone), the record goes to the sink's outbox as
/// before, so its worker retries or dead-letters it; replays and late versions always go
/// through the outbox.
public struct InlineDelivery: Sendable {
    /// The sink's name, as routes name it.
    public let sink: String
    /// One statement that writes one record's row.
    public let sql: String
    /// The statement's arguments for a record and that record's own ``EncodedRecord``
    /// (whose embedded JSON values need no second encoding), made before the write lock
    /// is taken.
    public let arguments: @Sendable (AttributionRecord, EncodedRecord) throws -> StatementArguments

    public init(
        sink: String, sql: String,
        arguments: @escaping @Sendable (AttributionRecord, EncodedRecord) throws -> StatementArguments
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

/// The inline sinks for one write, and whether their rows are written with the records
/// (not on the retry after one of them undid the transaction: outbox rows instead).
struct InlineWrites: Sendable {
    let deliveries: [String: InlineDelivery]
    var writesRows = true

    /// The same sinks, their records to their outboxes.
    var toOutboxes: InlineWrites {
        var writes = self
        writes.writesRows = false
        return writes
    }
}

/// A record ready to be written: its stored body, raw payload and size
/// (``EncodedRecord/stored``) and, per inline sink it is routed to, that sink's statement
/// arguments.
struct PreparedRecord: Sendable {
    let body: String
    let raw: [UInt8]?
    let size: Int
    let inline: [String: StatementArguments]
}

/// What one commit did for inline sinks: rows written, and records that went to a
/// sink's outbox instead (their workers must be woken).
struct InlineOutcome: Sendable {
    var delivered: [(sink: String, record: AttributionRecord, queuedAt: Date)] = []
    /// Per sink, how many records went to its outbox instead: their row failed, its
    /// arguments could not be made, or the write was retried with outbox rows only.
    var queued: [String: Int] = [:]

    mutating func add(_ other: InlineOutcome) {
        delivered += other.delivered
        queued.merge(other.queued, uniquingKeysWith: +)
    }
}

/// The inline sinks of one store, and who is told what they did.
final class InlineSinks: Sendable {
    private let deliveries = Mutex<[String: InlineDelivery]>([:])
    private let observer = Mutex<(any InlineDeliveryObserver)?>(nil)

    var writes: InlineWrites { InlineWrites(deliveries: deliveries.withLock { $0 }) }

    func add(_ delivery: InlineDelivery) {
        deliveries.withLock { $0[delivery.sink] = delivery }
    }

    func remove(sink: String) {
        deliveries.withLock { $0[sink] = nil }
    }

    func observe(_ observer: any InlineDeliveryObserver) {
        self.observer.withLock { $0 = observer }
    }

    func report(_ outcome: InlineOutcome) {
        guard !outcome.delivered.isEmpty || !outcome.queued.isEmpty, let observer = observer.withLock({ $0 }) else {
            return
        }
        for (sink, group) in Dictionary(grouping: outcome.delivered, by: \.sink) {
            observer.delivered(sink: sink, records: group.map { ($0.record, $0.queuedAt) })
        }
        for (sink, count) in outcome.queued { observer.fellBack(sink: sink, count: count) }
    }
}

extension SQLiteStore: InlineDeliveryStore {
    /// Writes `delivery.sink`'s rows in the store's own transactions from now on.
    public func deliverInline(_ delivery: InlineDelivery) {
        inlineSinks.add(delivery)
    }

    public func stopDeliveringInline(sink: String) {
        inlineSinks.remove(sink: sink)
    }

    public func observeInline(_ observer: any InlineDeliveryObserver) {
        inlineSinks.observe(observer)
    }

    public var inlineSinkNames: Set<String> { Set(inlineSinks.writes.deliveries.keys) }

    /// Bodies and inline arguments, made before the write lock is taken. A record whose
    /// arguments cannot be made goes to that sink's outbox, as a failed row would.
    func prepare(_ batch: [RoutedRecord], inline: InlineWrites) -> [PreparedRecord] {
        batch.map { item in
            let encoded = item.record.encoded()
            var arguments: [String: StatementArguments] = [:]
            for sink in item.sinks where inline.writesRows {
                if let delivery = inline.deliveries[sink] {
                    arguments[sink] = try? delivery.arguments(item.record, encoded)
                }
            }
            let stored = encoded.stored
            return PreparedRecord(body: stored.body, raw: stored.raw, size: stored.size, inline: arguments)
        }
    }
}
