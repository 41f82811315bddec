import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// Finishes one deferred provider's pending work: claims what is due, attempts it a few
/// at a time, and stores each outcome (records, or the next attempt's time) before
/// claiming more. The schedule lives in the store, so a restart resumes it; work that a
/// crash interrupted comes back when its claim's lease ends.
public final class PendingResolver: Service, Sendable {
    public let provider: any DeferredAttributionProvider
    let pipeline: IngestPipeline
    let logger: Logger
    let now: @Sendable () -> Date
    /// How long claimed work stays hidden from other claims; longer than any attempt.
    let lease: Duration
    /// The requests waiting for their token's first answer. A resolver a reload makes for
    /// the same provider takes its predecessor's, so that a request the old one took and
    /// the new one answers still gets its answer.
    public let waiters: AnswerWaiters<AttributionRecord>
    private let wakeUp = WakeUp()
    private let finishedHandlers = Mutex<[@Sendable ([String]) async -> Void]>([])
    private let startHandlers = Mutex<[@Sendable () async -> Void]>([])
    /// Attempts under way, for the shutdown's log: a stop waiting on a silent Apple says so.
    private let attemptsInFlight = Mutex(0)
    /// A failed attempt is logged with its reason at most once a minute, with how many
    /// failed since: an outside service that keeps failing must be seen, not flood the log.
    private let failedAttemptWarnings = OncePerInterval(.seconds(60))

    /// Runs `handler` once when the resolver starts, alongside its rounds: for what a
    /// stopped gateway left undone after an answer (`onFinished`'s work cut short).
    public func onStart(_ handler: @escaping @Sendable () async -> Void) {
        startHandlers.withLock { $0.append(handler) }
    }

    /// Runs `handler` with the record ids of each round's finished work, once it is stored:
    /// for what else follows from an answer (the SDK's purchases waiting for it).
    public func onFinished(_ handler: @escaping @Sendable ([String]) async -> Void) {
        finishedHandlers.withLock { $0.append(handler) }
    }

    public init(
        provider: any DeferredAttributionProvider, pipeline: IngestPipeline,
        logger: Logger = Logger(label: "gateway.pending"), lease: Duration = .seconds(120),
        waiters: AnswerWaiters<AttributionRecord> = AnswerWaiters(), now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.provider = provider
        self.waiters = waiters
        self.pipeline = pipeline
        var logger = logger
        logger[metadataKey: "provider"] = .string(provider.name)
        self.logger = logger
        self.lease = lease
        self.now = now
    }

    var store: any AttributionStore { pipeline.store }

    /// What a caller learns when it submits a payload.
    public struct Answer: Sendable {
        public var recordID: String
        /// True when the same dedupe key was already accepted.
        public var isDuplicate: Bool
        /// The finished record, when it is already stored.
        public var record: AttributionRecord?
    }

    /// Validates and keeps a payload, then waits up to the provider's `answerWait` for
    /// the first attempt. `authorize` sees the work before anything is stored.
    public func submit(
        _ payload: IngestPayload, authorize: (PendingWork) throws -> Void = { _ in }
    ) async throws -> Answer {
        let work = try provider.accept(payload)
        try authorize(work)
        pipeline.metrics.received(provider: provider.name, count: 1)
        await waiters.expect(work.recordID)
        let admission: PendingAdmission
        do {
            admission = try await store.addPending(work, now: now())
        } catch {
            await waiters.forget(work.recordID)
            throw GatewayError.storageUnavailable(cause: error)
        }
        switch admission {
        case .accepted(let id):
            wake()
            let wait = provider.answerWait
            let record = wait > .zero ? await waiters.wait(for: id, timeout: wait) : nil
            await waiters.forget(id)
            return Answer(recordID: id, isDuplicate: false, record: record)
        case .duplicate(let original, let resolved):
            await waiters.forget(work.recordID)
            pipeline.metrics.duplicate(provider: provider.name)
            let record = resolved ? try? await store.record(id: original) : nil
            return Answer(recordID: original, isDuplicate: true, record: record)
        }
    }

    public func wake() {
        wakeUp.signal()
    }

    public func run() async throws {
        logger.info("pending resolver started")
        // Alongside, not before: a sweep of a large store must not hold back the tokens
        // waiting for Apple. Cancelled, if still running, when `run` returns at shutdown.
        let handlers = startHandlers.withLock { $0 }
        async let _ = { for handler in handlers { await handler() } }()
        await withGracefulShutdownHandler {
            var failures = 0
            while !Task.isCancelled && !Task.isShuttingDownGracefully {
                do {
                    let attempted = try await drainOnce()
                    failures = 0
                    if attempted > 0 { continue }
                } catch {
                    // A store that cannot be written (a full disk) fails at once: without
                    // a pause this would loop, flooding the log and burning CPU.
                    failures += 1
                    logger.error(
                        "cannot read pending work", metadata: ["error": "\(error)", "failures": "\(failures)"])
                    await wakeUp.wait(timeout: min(.milliseconds(100) * (1 << min(failures - 1, 9)), .seconds(30)))
                    continue
                }
                var wait = Duration.seconds(60)
                if let next = try? await store.nextPendingDate(provider: provider.name) {
                    let seconds = max(0, min(60, next.timeIntervalSince(now())))
                    wait = .milliseconds(Int64(seconds * 1000) + 1)
                }
                await wakeUp.wait(timeout: wait)
            }
        } onGracefulShutdown: {
            let inFlight = self.attemptsInFlight.withLock { $0 }
            if inFlight > 0 {
                self.logger.info("waiting for attempts in flight", metadata: ["count": "\(inFlight)"])
            }
            self.wake()
        }
    }

    /// Claims due work, attempts it `resolveConcurrency` at a time, and writes the round's
    /// outcomes in one transaction (one commit per round, not per token: with
    /// `durability: full` each commit is an fsync). Returns how many were attempted.
    public func drainOnce() async throws -> Int {
        let concurrency = max(1, provider.resolveConcurrency)
        let due = try await store.claimPending(
            provider: provider.name, now: now(), lease: lease, limit: concurrency * 4)
        guard !due.isEmpty else { return 0 }
        let (attempts, notBegun) = await withTaskGroup(of: (PendingWork, ResolutionStep).self) { group in
            var rest = due.makeIterator()
            @Sendable func begin(_ work: PendingWork) async -> (PendingWork, ResolutionStep) {
                attemptsInFlight.withLock { $0 += 1 }
                defer { attemptsInFlight.withLock { $0 -= 1 } }
                return (work, await provider.resolve(work))
            }
            for _ in 0..<concurrency {
                guard let work = rest.next() else { break }
                group.addTask { await begin(work) }
            }
            var done: [(work: PendingWork, step: ResolutionStep)] = []
            while let attempt = await group.next() {
                done.append(attempt)
                // Stopping (a shutdown, or a reload that replaces the resolver): no call
                // begins, since with Apple hanging each would hold the stop for its whole
                // timeout. The rest are released below.
                guard !Task.isShuttingDownGracefully else { continue }
                if let work = rest.next() { group.addTask { await begin(work) } }
            }
            return (done, Array(IteratorSequence(rest)))
        }
        do {
            // Apple has answered: kept even if shutdown came meanwhile. Work not begun is
            // released, due now, for the resolver that follows (a reload's, or another
            // replica's) rather than held for the claim's lease.
            let now = now()
            try await uncancelled { try await self.pipeline.settle(attempts, now: now) }
            if !notBegun.isEmpty {
                logger.info("attempts not begun: the resolver is stopping", metadata: ["count": "\(notBegun.count)"])
                let released = notBegun.map { work in
                    PendingSettlement.retry(
                        recordID: work.recordID, state: work.state, attempts: work.attempts, at: now,
                        error: "not attempted: the resolver stopped first")
                }
                try await uncancelled { try await self.pipeline.commit(released) }
            }
        } catch {
            // The claims' lease brings the work back; nothing is lost.
            logger.error(
                "cannot store a round of attempts", metadata: ["count": "\(attempts.count)", "error": "\(error)"])
            for (work, _) in attempts { await waiters.attempted(work.recordID, answer: nil) }
            return attempts.count
        }
        for (work, step) in attempts {
            switch step {
            case .finished(let records):
                pipeline.metrics.resolutionAttempt(
                    provider: provider.name, outcome: records.first?.resolution.rawValue ?? "empty")
                await waiters.attempted(work.recordID, answer: records.first)
            case .retry(_, let error, _):
                pipeline.metrics.resolutionAttempt(provider: provider.name, outcome: "retry")
                await waiters.attempted(work.recordID, answer: nil)
                if let held = failedAttemptWarnings.pass() {
                    logger.warning(
                        "an attempt failed and will be retried",
                        metadata: [
                            "record_id": "\(work.recordID)", "attempt": "\(work.attempts + 1)", "error": "\(error)",
                            "failed_since_last_line": "\(held)",
                        ])
                }
            }
        }
        // After the waiters have their answers: what follows from them is no caller's wait.
        let finished = attempts.compactMap { attempt -> String? in
            if case .finished = attempt.step { return attempt.work.recordID }
            return nil
        }
        if !finished.isEmpty {
            for handler in finishedHandlers.withLock({ $0 }) { await handler(finished) }
        }
        return attempts.count
    }
}
