import Logging
import ServiceLifecycle
import Synchronization

/// Services that come and go while the gateway runs, one per name: the sinks' workers,
/// and what providers and enrichers run beside the server (a resolver of pending tokens,
/// a late-name writer, a spend fetch). A service a reload stops finishes its work in hand
/// first, as at a shutdown; one started under a name already running starts once the
/// previous one has stopped, so that two never work the same rows.
final class LiveServices<Value: Sendable>: Service, Sendable {
    /// One service, run in a service group of its own so that it can be shut down
    /// gracefully alone, with what its owner keeps beside it.
    final class Slot: Sendable {
        let value: Value
        let group: ServiceGroup
        let stopped = Latch()
        private let state = Mutex((started: false, stopAsked: false))

        init(value: Value, service: any Service, logger: Logger) {
            self.value = value
            group = ServiceGroup(configuration: .init(services: [service], logger: logger))
        }

        /// Asks the service to stop after its work in hand. One replaced before it started
        /// (a burst of reloads) never starts: a trimmer with a cap meant for a tenth of a
        /// second would drop what the next cap keeps.
        func stop() {
            let started = state.withLock { state in
                state.stopAsked = true
                return state.started
            }
            if started { Task { await group.triggerGracefulShutdown() } }
        }

        /// Runs the service unless it was asked to stop first.
        func run() async throws {
            let go = state.withLock { state in
                state.started = !state.stopAsked
                return state.started
            }
            if go { try await group.run() }
        }
    }

    private let slots = Mutex<[String: Slot]>([:])
    /// Services stopped by a removal and still finishing (always locked inside `slots`).
    private let stopping = Mutex<[String: Slot]>([:])
    private let starts: AsyncStream<@Sendable () async -> Void>
    private let startsContinuation: AsyncStream<@Sendable () async -> Void>.Continuation
    private let logger: Logger

    init(logger: Logger) {
        (starts, startsContinuation) = AsyncStream.makeStream()
        self.logger = logger
    }

    /// What each running service's owner keeps beside it, by name.
    var values: [String: Value] {
        slots.withLock { $0.mapValues(\.value) }
    }

    func value(named name: String) -> Value? {
        slots.withLock { $0[name]?.value }
    }

    /// Runs `service` under `name` from now on. A service running under that name (or
    /// still finishing after a removal) is stopped after its work in hand, and the new
    /// one starts once it has.
    func start(_ name: String, _ service: any Service, value: Value) {
        let slot = Slot(value: value, service: service, logger: logger)
        let (current, stopping) = slots.withLock { slots in
            defer { slots[name] = slot }
            return (slots[name], self.stopping.withLock { $0[name] })
        }
        current?.stop()
        let previous = current ?? stopping
        startsContinuation.yield { [logger] in
            await previous?.stopped.wait()
            do {
                try await slot.run()
            } catch {
                logger.error("service failed", metadata: ["service": "\(name)", "error": "\(error)"])
            }
            slot.stopped.open()
        }
    }

    /// Stops `name`'s service after its work in hand. `afterwards` runs once it has
    /// stopped, told whether a service runs under the name again by then.
    @discardableResult
    func stop(_ name: String, afterwards: @escaping @Sendable (_ runsAgain: Bool) -> Void = { _ in }) -> Bool {
        guard
            let slot = slots.withLock({ slots in
                let slot = slots.removeValue(forKey: name)
                if let slot { stopping.withLock { $0[name] = slot } }
                return slot
            })
        else { return false }
        slot.stop()
        Task {
            await slot.stopped.wait()
            self.slots.withLock { slots in
                self.stopping.withLock { stopping in
                    if stopping[name] === slot { stopping[name] = nil }
                }
                afterwards(slots[name] != nil)
            }
        }
        return true
    }

    func run() async throws {
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
