import GatewayCore
import Logging
import ServiceLifecycle
import Synchronization

/// The sink workers as they stand: one per sink config.yaml names, those of the start,
/// then each reload's. A worker a reload stops (its sink changed or removed) finishes its
/// batch first, as at a shutdown; a changed sink's new worker starts once the old one
/// has stopped, so that two never take the same outbox rows. Undelivered records stay in
/// the outbox whatever happens to their worker.
public final class LiveSinkWorkers: Service, Sendable {
    /// One worker, run in a service group of its own so that it can be shut down
    /// gracefully alone.
    final class Slot: Sendable {
        let worker: SinkWorker
        /// Whether its sink's destination counts every copy it is sent (see ``RecordRouter``).
        let countsEveryCopy: Bool
        let group: ServiceGroup
        let stopped = Latch()

        init(worker: SinkWorker, countsEveryCopy: Bool, logger: Logger) {
            self.worker = worker
            self.countsEveryCopy = countsEveryCopy
            group = ServiceGroup(configuration: .init(services: [worker], logger: logger))
        }

        /// Asks the worker to stop after its batch in flight.
        func stop() {
            Task { await group.triggerGracefulShutdown() }
        }
    }

    private let slots = Mutex<[String: Slot]>([:])
    /// Workers stopped by a removal and still finishing their batch (always locked inside
    /// `slots`).
    private let stopping = Mutex<[String: Slot]>([:])
    private let starts: AsyncStream<@Sendable () async -> Void>
    private let startsContinuation: AsyncStream<@Sendable () async -> Void>.Continuation
    private let health: WorkerHealth
    private let logger: Logger

    init(health: WorkerHealth, logger: Logger) {
        (starts, startsContinuation) = AsyncStream.makeStream()
        self.health = health
        self.logger = logger
    }

    /// Every current worker, by sink name.
    public var workers: [SinkWorker] {
        slots.withLock { $0.values.map(\.worker) }.sorted { $0.sinkName < $1.sinkName }
    }

    public func worker(named sink: String) -> SinkWorker? {
        slots.withLock { $0[sink]?.worker }
    }

    /// The sinks whose destinations count every copy they are sent.
    var countingEveryCopy: Set<String> {
        slots.withLock { Set($0.values.filter(\.countsEveryCopy).map(\.worker.sinkName)) }
    }

    /// Runs `worker` for its sink from now on. A worker running for that sink (or still
    /// finishing its batch after a removal) is stopped after its batch, and the new one
    /// starts once it has.
    func start(_ worker: SinkWorker, countsEveryCopy: Bool) {
        let slot = Slot(worker: worker, countsEveryCopy: countsEveryCopy, logger: logger)
        let (current, stopping) = slots.withLock { slots in
            defer { slots[worker.sinkName] = slot }
            return (slots[worker.sinkName], self.stopping.withLock { $0[worker.sinkName] })
        }
        current?.stop()
        let previous = current ?? stopping
        startsContinuation.yield { [logger] in
            await previous?.stopped.wait()
            do {
                try await slot.group.run()
            } catch {
                logger.error(
                    "sink worker failed", metadata: ["sink": "\(worker.sinkName)", "error": "\(error)"])
            }
            slot.stopped.open()
        }
    }

    /// Stops `sink`'s worker after its batch; its outbox rows wait until a configuration
    /// names the sink again.
    func stop(_ sink: String) {
        guard
            let slot = slots.withLock({ slots in
                let slot = slots.removeValue(forKey: sink)
                if let slot { stopping.withLock { $0[sink] = slot } }
                return slot
            })
        else { return }
        // Its worker's stop is not a stopped sink at `/readyz`: it leaves.
        health.handOver(sink)
        slot.stop()
        Task { [health] in
            await slot.stopped.wait()
            self.slots.withLock { slots in
                self.stopping.withLock { stopping in
                    if stopping[sink] === slot { stopping[sink] = nil }
                }
                // Not expected at `/readyz` any more, unless a later reload named it again.
                if slots[sink] == nil { health.forget(sink) }
            }
        }
    }

    public func run() async throws {
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                for await start in starts {
                    group.addTask { await start() }
                }
            }
        } onGracefulShutdown: {
            for slot in self.slots.withLock({ Array($0.values) }) { slot.stop() }
            self.startsContinuation.finish()
        }
    }
}

/// Opens once; who waits before then waits until it does.
final class Latch: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }
}
