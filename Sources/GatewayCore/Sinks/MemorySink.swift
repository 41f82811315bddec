import Synchronization

/// Keeps delivered records in memory: the reference sink for tests and examples.
///
/// `failures` lets a test script what the next deliveries answer, one outcome per record,
/// so the worker's retry and dead-letter paths can be driven on purpose.
public final class MemorySink: AttributionSink {
    public let maxBatchSize: Int
    private let state = Mutex(State())

    struct State {
        var delivered: [AttributionRecord] = []
        var batches: [[String]] = []
        var script: [@Sendable (AttributionRecord) -> DeliveryOutcome?] = []
        var failNextBatches = 0
    }

    public init(maxBatchSize: Int = 100) {
        self.maxBatchSize = maxBatchSize
    }

    /// Every record delivered so far, in delivery order.
    public var delivered: [AttributionRecord] { state.withLock { $0.delivered } }
    /// The record ids of every batch offered, including failed ones.
    public var batches: [[String]] { state.withLock { $0.batches } }

    /// The next `count` calls to `deliver` throw, as an unreachable endpoint would.
    public func failNextBatches(_ count: Int) {
        state.withLock { $0.failNextBatches = count }
    }

    /// Until removed, records for which `rule` returns an outcome get that outcome.
    public func addRule(_ rule: @escaping @Sendable (AttributionRecord) -> DeliveryOutcome?) {
        state.withLock { $0.script.append(rule) }
    }

    public func removeRules() {
        state.withLock { $0.script.removeAll() }
    }

    struct Unreachable: Error {}

    public func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
        try state.withLock { state in
            state.batches.append(records.map(\.recordID))
            if state.failNextBatches > 0 {
                state.failNextBatches -= 1
                throw Unreachable()
            }
            var outcomes: [DeliveryOutcome] = []
            for record in records {
                // Each rule runs once per record (a lazy compactMap would run it twice,
                // which breaks rules that count).
                var outcome = DeliveryOutcome.delivered
                for rule in state.script {
                    if let scripted = rule(record) {
                        outcome = scripted
                        break
                    }
                }
                if outcome == .delivered { state.delivered.append(record) }
                outcomes.append(outcome)
            }
            return outcomes
        }
    }
}
