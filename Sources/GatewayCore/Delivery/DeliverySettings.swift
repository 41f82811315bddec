/// How one sink's worker delivers: the common keys of every entry under `sinks:`.
public struct DeliverySettings: Sendable, Equatable {
    /// Records per call to the sink (never more than the sink's own limit).
    public var batchSize: Int
    /// Attempts before a record goes to the dead-letter queue. The default, 1,000, is
    /// 1.3 to 2.6 days (by the jitter) at the 5-minute cap: a sink's outage of a weekend delays
    /// its records, and does not leave them for an operator to retry by hand. (A
    /// destination's refusal of a record, `reject`, dead-letters it at once.)
    public var maxAttempts: Int
    /// The first retry's delay; it doubles each attempt up to `backoffMax`.
    public var backoffInitial: Duration
    public var backoffMax: Duration
    /// While paused, records are kept in the outbox and not delivered.
    public var paused: Bool
    /// How often an idle worker looks for records written by other processes.
    public var idlePoll: Duration
    /// Deliver each device's records one after another, in the order they were stored
    /// (``AttributionRecord/deliveryLane``): a record waiting for a retry holds back the
    /// later ones of its device, not the others.
    public var inDeviceOrder = false

    public init(
        batchSize: Int = 100, maxAttempts: Int = 1000, backoffInitial: Duration = .seconds(1),
        backoffMax: Duration = .seconds(300), paused: Bool = false, idlePoll: Duration = .seconds(1)
    ) {
        self.batchSize = batchSize
        self.maxAttempts = maxAttempts
        self.backoffInitial = backoffInitial
        self.backoffMax = backoffMax
        self.paused = paused
        self.idlePoll = idlePoll
    }

    /// The wait before the next attempt: exponential from `backoffInitial`, capped at
    /// `backoffMax`, with "equal jitter" (half fixed, half random) so that records that
    /// failed together do not retry together. A `Retry-After` from the sink is a floor.
    ///
    /// - Parameters:
    ///   - attempt: failed attempts so far, counting this one (1 for the first failure).
    ///   - unit: a random number in 0..<1.
    public func backoff(attempt: Int, retryAfter: Duration?, unit: Double) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let initial = backoffInitial / .seconds(1)
        let cap = backoffMax / .seconds(1)
        let base = min(cap, initial * Double(1 << exponent))
        var seconds = base / 2 + base / 2 * unit
        if let retryAfter {
            seconds = max(seconds, retryAfter / .seconds(1))
        }
        return .milliseconds(Int64((seconds * 1000).rounded()))
    }
}
