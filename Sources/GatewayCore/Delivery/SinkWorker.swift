import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// Drains one sink's outbox: batches, retries with backoff and jitter, dead letters.
///
/// Every decision is written to the store before the next batch, so a crash at any point
/// re-offers at most the batch in flight (at-least-once; sinks write idempotently by
/// `record_id`). A slow or dead sink only delays its own outbox.
public final class SinkWorker: Service, Sendable {
    public let sinkName: String
    let sink: any AttributionSink
    let store: any OutboxStore
    public let settings: DeliverySettings
    let metrics: GatewayMetrics
    let logger: Logger
    let health: WorkerHealth
    let now: @Sendable () -> Date
    let random: @Sendable () -> Double
    private let wakeUp = WakeUp()
    /// While a sink is down every batch fails; its metrics count each one, the log says
    /// so once a minute rather than at the rate records arrive.
    private let incompleteWarnings = OncePerInterval(.seconds(60))
    /// Dead letters are logged apart, at most once a second: sharing the retries' minute,
    /// a poison record behind a retried batch was never logged at all.
    private let deadLetterWarnings = OncePerInterval(.seconds(1))
    private let deadLettersNotLogged = Mutex(0)
    /// The sink's answers for a batch that the store could not take (a full disk, a lock
    /// held): written before anything is offered again. Offered again instead, the same
    /// batch reached the sink once a poll for as long as the store failed, and a vendor
    /// counted each copy.
    private let unwritten = Mutex<(resolutions: [OutboxResolution], at: Date)?>(nil)
    /// Until when the last batch, which waits whole, keeps the worker from taking another
    /// (the sink's circuit open, its destination down): see `drainOnce`.
    let postponedUntil = Mutex<Date?>(nil)
    /// Batches in a row that the sink failed whole by throwing; none due resets it.
    private let batchesFailedWhole = Mutex(0)
    /// Batches in a row that the destination refused whole (throttled, or down).
    private let throttledBatches = Mutex(0)
    /// The longest a throttled destination pauses the worker, whatever the records' backoff.
    static let maxThrottlePause: Duration = .seconds(30)
    /// The longest a stop waits to give back a batch it cut short: an optimisation, not an
    /// answer, so a store slow to take it must not hold the stop for its whole timeout.
    static let giveBackLimit: Duration = .seconds(2)

    public init(
        sinkName: String,
        sink: any AttributionSink,
        store: any OutboxStore,
        settings: DeliverySettings,
        metrics: GatewayMetrics = .none,
        logger: Logger = Logger(label: "gateway.delivery"),
        health: WorkerHealth = WorkerHealth(),
        now: @escaping @Sendable () -> Date = { Date() },
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) {
        self.sinkName = sinkName
        self.sink = sink
        self.store = store
        self.settings = settings
        self.metrics = metrics
        var logger = logger
        logger[metadataKey: "sink"] = .string(sinkName)
        self.logger = logger
        self.health = health
        self.now = now
        self.random = random
        health.expect(sinkName)
    }

    /// Wakes the worker if it is waiting for work.
    public func wake() {
        wakeUp.signal()
    }

    public func run() async throws {
        health.set(sinkName, running: true)
        defer { health.set(sinkName, running: false) }
        logger.info("sink worker started", metadata: ["paused": "\(settings.paused)"])
        await withGracefulShutdownHandler {
            // The store failing again and again waits longer each time, to 30 s.
            var failures = 0
            while !Task.isCancelled && !Task.isShuttingDownGracefully {
                if settings.paused {
                    await wakeUp.wait(timeout: .seconds(3600))
                    continue
                }
                if let until = postponedUntil.withLock({ $0 }), case let left = until.timeIntervalSince(now()), left > 0
                {
                    // New records wake the worker; they wait for the sink like the rest.
                    await wakeUp.wait(timeout: .milliseconds(Int64(left * 1000) + 1))
                    continue
                }
                do {
                    let offered = try await drainOnce()
                    failures = 0
                    if offered > 0 { continue }
                    await wakeUp.wait(timeout: try await idleWait())
                } catch {
                    failures += 1
                    logger.error("outbox unavailable", metadata: ["error": "\(error)", "failures": "\(failures)"])
                    await wakeUp.wait(timeout: min(settings.idlePoll * (1 << min(failures - 1, 8)), .seconds(30)))
                }
            }
        } onGracefulShutdown: {
            self.wake()
        }
        // Answers the store could not take yet: one last try, or the batch is offered again
        // after the restart (at least once, as after a crash).
        try? await writeUnwritten()
        logDeadLettersNotLogged(atStop: true)
        await sink.shutdown()
        logger.info("sink worker stopped")
    }

    /// Offers one batch of due records to the sink and records the outcome.
    /// Returns how many records were offered (0 when nothing was due).
    @discardableResult
    public func drainOnce() async throws -> Int {
        logDeadLettersNotLogged()
        try await writeUnwritten()
        let limit = max(1, min(settings.batchSize, sink.maxBatchSize))
        let due = try await store.dueEntries(
            sink: sinkName, now: now(), limit: limit, laneOrdered: settings.inDeviceOrder)
        guard !due.isEmpty else {
            batchesFailedWhole.withLock { $0 = 0 }
            return 0
        }
        let entries = due.filter { $0.unreadable == nil }
        let unreadable = due.filter { $0.unreadable != nil }
        if !unreadable.isEmpty {
            logger.error(
                "stored records cannot be read; dead-lettered",
                metadata: ["count": "\(unreadable.count)", "error": "\(unreadable[0].unreadable ?? "")"])
            try await store.resolve(
                sink: sinkName,
                unreadable.map { .deadLetter(id: $0.id, attempts: $0.attempts, error: $0.unreadable ?? "") }, now: now()
            )
            metrics.delivery(sink: sinkName, outcome: "dead_letter", count: unreadable.count)
            if entries.isEmpty { return due.count }
        }

        // One draw for the batch: its retries come due together and go again as one batch.
        // Drawn per record, a refused batch would come back one record at a time, one
        // request per record once the destination recovered.
        let jitter = random()
        // Rows a sink was sending when the gateway stopped are not offered again: the sink
        // says what they become (a vendor may have counted them).
        var answered: [DeliveryOutcome?] = entries.map { $0.wasBeingSent ? sink.interruptedSend(of: $0.record) : nil }
        let offered = entries.indices.filter { answered[$0] == nil }
        // Answers the sink reported as they came, already written, by outbox id.
        let settled = Mutex<[Int64: OutboxResolution]>([:])
        let progress = DeliveryProgress(
            sending: { index in try await self.store.markSending(id: entries[offered[index]].id, now: self.now()) },
            answered: { index, outcome in
                let entry = entries[offered[index]]
                let decidedAt = self.now()
                let resolution = self.resolution(of: entry, outcome, decidedAt: decidedAt, jitter: jitter)
                // Written whatever a shutdown does meanwhile (cancelled, the write would not
                // take, and the row would keep its mark: a vendor's 503 read at the restart
                // as "may have counted it"). Not written now: the batch's end writes it with
                // the rest.
                let sinkName = self.sinkName, store = self.store
                guard
                    (try? await uncancelled { try await store.resolve(sink: sinkName, [resolution], now: decidedAt) })
                        != nil
                else { return }
                settled.withLock { $0[entry.id] = resolution }
            })
        /// The sink failed the batch whole, its own failure (the protocol's contract for a
        /// throw: its destination down, its disk full), not one record's.
        var threw = false
        if !offered.isEmpty {
            var answers: [DeliveryOutcome]
            do {
                answers = try await sink.deliver(offered.map { entries[$0].record }, progress: progress)
                if answers.count != offered.count {
                    let reason = "sink answered \(answers.count) outcomes for \(offered.count) records"
                    logger.error("sink broke its contract", metadata: ["reason": "\(reason)"])
                    answers = Array(repeating: .retry(reason: reason), count: offered.count)
                }
            } catch {
                // Shutdown cut the batch short (see `giveBack`).
                if Task.isCancelled {
                    let written = settled.withLock { $0 }
                    await giveBack(entries.filter { written[$0.id] == nil })
                    return due.count
                }
                answers = Array(repeating: .retry(reason: "\(error)"), count: offered.count)
                threw = true
            }
            for (index, answer) in zip(offered, answers) { answered[index] = answer }
        }
        let written = settled.withLock { $0 }

        // Shutdown came while the sink answered for part of the batch (the exec sink keeps
        // what its plugin acknowledged): those answers stand, and the rest stays in the
        // outbox as it was, no attempt counted, as a batch cut short does.
        let outcomes = answered.map { $0 ?? .retry(reason: "not answered") }
        let cutShort = Task.isCancelled
        let decidedAt = now()
        /// Every entry's resolution, those written as they came included; `resolutions`
        /// are the ones still to write.
        var decisions: [OutboxResolution] = []
        var resolutions: [OutboxResolution] = []
        var delivered = 0, declined = 0, retried = 0, postponed = 0, dead = 0, inProgress = 0
        var firstDead: (recordID: String, error: String)?
        /// The records cut short that no one asked to wait: given back to the other replicas
        /// (see `giveBack`). One the destination or the sink's circuit asked to wait (a
        /// `Retry-After`, a postponement) waits for its lease instead.
        var leftUnanswered: [OutboxEntry] = []
        for (entry, outcome) in zip(entries, outcomes) {
            let already = written[entry.id]
            switch outcome {
            case .retry(_, nil) where cutShort && already == nil:
                leftUnanswered.append(entry)
                continue
            case .retry where cutShort && already == nil, .postponed where cutShort && already == nil:
                continue
            default:
                break
            }
            let resolution = already ?? self.resolution(of: entry, outcome, decidedAt: decidedAt, jitter: jitter)
            decisions.append(resolution)
            if already == nil { resolutions.append(resolution) }
            switch (outcome, resolution) {
            case (.delivered, _):
                delivered += 1
                metrics.deliveryLatency(
                    sink: sinkName, seconds: decidedAt.timeIntervalSince(entry.queuedAt ?? entry.record.receivedAt))
            case (.declined, _):
                declined += 1
            case (.postponed, _):
                postponed += 1
            case (.checkLater, _):
                inProgress += 1
            case (.retry(let reason, _), .deadLetter), (.reject(let reason), _):
                dead += 1
                firstDead = firstDead ?? (entry.record.recordID, reason)
            case (.retry, _):
                retried += 1
            }
        }
        // The sink down (its circuit open, its destination gone, its disk full) pauses the
        // worker until the first record of the batch is due: taking the next batch at once
        // would fail the whole backlog through at full speed (on a full disk), or rewrite
        // every record once per cool-down. Down is a batch postponed
        // whole, or two batches in a row the sink failed whole by throwing. Never records
        // retried one by one, however many (devices a vendor does not know yet), nor one
        // batch alone (a record a plugin crashes on): they must not hold back the others.
        // A batch whose every record the destination asked to wait for (`429` or `503`
        // with `Retry-After`: its quota or its outage, not one record's) is down too:
        // each next batch of a backlog was sent only to be told the same.
        let streak = batchesFailedWhole.withLock { count in
            count = threw && !cutShort ? count + 1 : 0
            return count
        }
        // Records the sink kept from the destination by design (declined: a Mixpanel
        // record without a user), or held back once it refused the batch's first
        // (postponed: a vendor's), asked it nothing, and say nothing of a throttle.
        let asked = outcomes.filter { outcome in
            switch outcome {
            case .declined, .postponed, .checkLater: false
            default: true
            }
        }
        // A wait of zero is a refusal of the destination's whole without a time (`429` or
        // `5xx` and no `Retry-After`, which Mixpanel and AppsFlyer do not promise): the
        // next batch would get the same.
        // And only when it refused more than one record, or one never tried before: one
        // record the destination chokes on, due alone, is that record's (pausing the
        // worker on its own backoff, towards an hour, would hold every new event).
        // Records tried before, many at once, are a backlog refused again: after a
        // restart during an outage every record has been tried, and the backlog would
        // otherwise go out as refused batch after refused batch.
        let throttled =
            !threw && !asked.isEmpty
            && asked.allSatisfy { outcome in
                if case .retry(_, _?) = outcome { return true }
                return false
            }
            && (asked.count > 1
                || zip(entries, outcomes).contains { entry, outcome in
                    if case .retry = outcome { return entry.attempts == 0 }
                    return false
                })
        let down = !cutShort && (postponed == outcomes.count || streak >= 2 || throttled)
        var firstDue = decisions.compactMap { resolution -> Date? in
            if case .retry(_, _, let at, _) = resolution { return at }
            return nil
        }.min()
        // Throttled batch after throttled batch waits longer each time, as the records'
        // own backoff does: the batch's first due record alone comes back within a second
        // or two, and a vendor throttled without `Retry-After` would be asked again and again.
        let throttledInARow = throttledBatches.withLock { count in
            count = throttled && !cutShort ? count + 1 : 0
            return count
        }
        if throttledInARow > 1, let due = firstDue {
            let wait = settings.backoff(attempt: throttledInARow, retryAfter: nil, unit: jitter)
            firstDue = max(due, decidedAt.addingTimeInterval(wait / .seconds(1)))
        }
        // Never longer than `maxThrottlePause`: the records' own backoff reaches an hour,
        // and paused that long the worker would hold every new event too. A batch each
        // half minute finds out when it is over.
        if throttled, let due = firstDue {
            firstDue = min(due, decidedAt.addingTimeInterval(Self.maxThrottlePause / .seconds(1)))
        }
        postponedUntil.withLock { $0 = down ? firstDue : nil }
        metrics.delivery(sink: sinkName, outcome: "delivered", count: delivered)
        metrics.delivery(sink: sinkName, outcome: "declined", count: declined)
        metrics.delivery(sink: sinkName, outcome: "retry", count: retried)
        metrics.delivery(sink: sinkName, outcome: "postponed", count: postponed)
        metrics.delivery(sink: sinkName, outcome: "in_progress", count: inProgress)
        metrics.delivery(sink: sinkName, outcome: "dead_letter", count: dead)
        // The sink has answered: that must be written even if shutdown came meanwhile, and
        // kept until it is.
        let decided = resolutions
        do {
            try await uncancelled { try await self.store.resolve(sink: self.sinkName, decided, now: decidedAt) }
        } catch {
            unwritten.withLock { $0 = (decided, decidedAt) }
            throw error
        }
        if !leftUnanswered.isEmpty { await giveBack(leftUnanswered) }
        if settings.inDeviceOrder {
            let held = decisions.compactMap { resolution -> (id: Int64, until: Date)? in
                if case .retry(let id, _, let at, _) = resolution { return (id, at) }
                return nil
            }
            // Only saves scanning: a failure here changes no outcome.
            do {
                try await store.holdLanes(sink: sinkName, behind: held)
            } catch {
                logger.warning("could not hold the lanes of retried records", metadata: ["error": "\(error)"])
            }
        }
        if let firstDead { logDeadLetters(dead, first: firstDead) }
        if retried > 0, incompleteWarnings.allow() {
            let firstError: String? = outcomes.lazy.compactMap { outcome -> String? in
                if case .retry(let reason, _) = outcome { return reason }
                return nil
            }.first
            logger.warning(
                "delivery incomplete",
                metadata: [
                    "delivered": "\(delivered)", "retry": "\(retried)", "dead_letter": "\(dead)",
                    "error": "\(firstError ?? "")",
                ])
        }
        return due.count
    }

    /// What `outcome` makes of `entry`'s outbox row, decided at `decidedAt`, with the
    /// batch's `jitter` (0..<1).
    func resolution(of entry: OutboxEntry, _ outcome: DeliveryOutcome, decidedAt: Date, jitter: Double)
        -> OutboxResolution
    {
        // A destination's answer may quote what it was sent (a vendor's 400 echoing the
        // event): the record's ids are taken out before the reason reaches a log line or a
        // dead letter. Gathered only then: most records are delivered.
        func withoutIDs(_ reason: String) -> String {
            SecretText.removing(entry.record.identifyingValues, from: reason, as: "user id")
        }
        switch outcome {
        case .delivered, .declined:
            return .delivered(id: entry.id)
        case .postponed(let reason, let after), .checkLater(let reason, let after):
            let at = decidedAt.addingTimeInterval(max(after, .zero) / .seconds(1))
            return .retry(id: entry.id, attempts: entry.attempts, at: at, error: withoutIDs(reason))
        case .retry(let reason, let after):
            let attempts = entry.attempts + 1
            guard attempts < settings.maxAttempts else {
                return .deadLetter(id: entry.id, attempts: attempts, error: withoutIDs(reason))
            }
            let delay = settings.backoff(attempt: attempts, retryAfter: after, unit: jitter)
            return .retry(
                id: entry.id, attempts: attempts, at: decidedAt.addingTimeInterval(delay / .seconds(1)),
                error: withoutIDs(reason))
        case .reject(let reason):
            return .deadLetter(id: entry.id, attempts: entry.attempts + 1, error: withoutIDs(reason))
        }
    }

    /// One line for the batch's dead letters, with the first one's record and reason, and
    /// how many went unlogged since the last such line.
    private func logDeadLetters(_ count: Int, first: (recordID: String, error: String)) {
        guard deadLetterWarnings.allow() else {
            deadLettersNotLogged.withLock { $0 += count }
            return
        }
        let unlogged = takeDeadLettersNotLogged()
        logger.error(
            "records moved to the dead letters",
            metadata: [
                "dead_letter": "\(count)", "record_id": "\(first.recordID)", "error": "\(first.error)",
                "similar_failures_not_logged": "\(unlogged)",
            ])
    }

    /// Dead letters the once-a-second limit held back, told at the next poll after it, or
    /// at the stop: with no dead letter after them, they were never logged.
    private func logDeadLettersNotLogged(atStop: Bool = false) {
        guard deadLettersNotLogged.withLock({ $0 }) > 0, atStop || deadLetterWarnings.allow() else { return }
        logger.error("records moved to the dead letters", metadata: ["dead_letter": "\(takeDeadLettersNotLogged())"])
    }

    private func takeDeadLettersNotLogged() -> Int {
        deadLettersNotLogged.withLock { held in
            defer { held = 0 }
            return held
        }
    }

    /// A batch a shutdown cut short stays in the outbox as it was, not a failed attempt, and
    /// is offered again: by another replica at once, once the store has its lease back, or
    /// after the restart. Not given back within ``giveBackLimit`` (the store unreachable),
    /// it waits for its lease.
    private func giveBack(_ entries: [OutboxEntry]) async {
        let sinkName = sinkName, store = store
        do {
            // Not cancelled with the stop, which has begun, but given up at its limit.
            try await uncancelled {
                try await withinLimit(Self.giveBackLimit, else: { GiveBackLate() }) {
                    try await store.unclaim(sink: sinkName, entries)
                }
            }
            logger.info("batch in flight left in the outbox by shutdown", metadata: ["records": "\(entries.count)"])
        } catch {
            logger.warning(
                "batch in flight left in the outbox by shutdown, leased until its lease ends",
                metadata: ["records": "\(entries.count)", "error": "\(error)"])
        }
    }

    private struct GiveBackLate: Error, CustomStringConvertible {
        var description: String { "the store did not take it within \(SinkWorker.giveBackLimit)" }
    }

    /// Writes the answers the store could not take before, if any.
    private func writeUnwritten() async throws {
        guard let pending = unwritten.withLock({ $0 }) else { return }
        try await uncancelled {
            try await self.store.resolve(sink: self.sinkName, pending.resolutions, now: pending.at)
        }
        unwritten.withLock { $0 = nil }
        logger.info(
            "answers the outbox could not take are written", metadata: ["records": "\(pending.resolutions.count)"])
    }

    private func idleWait() async throws -> Duration {
        guard let next = try await store.nextDueDate(sink: sinkName, laneOrdered: settings.inDeviceOrder) else {
            return settings.idlePoll
        }
        let seconds = next.timeIntervalSince(now())
        if seconds <= 0 { return .zero }
        return min(settings.idlePoll, .milliseconds(Int64(seconds * 1000) + 1))
    }
}
