import Synchronization

/// Which sink workers are running, for `/readyz`.
public final class WorkerHealth: Sendable {
    private struct State {
        var running: [String: Bool] = [:]
        /// Sinks a reload is changing: a new one whose worker is being built and started,
        /// a changed one whose old worker stops before the new one starts, a removed one
        /// whose worker is stopping. None of those moments is a stopped sink.
        var handingOver: Set<String> = []
    }

    private let state = Mutex(State())

    public init() {}

    func set(_ sink: String, running value: Bool) {
        state.withLock { state in
            state.running[sink] = value
            if value { state.handingOver.remove(sink) }
        }
    }

    /// Sinks whose worker is registered but not running.
    public var stoppedSinks: [String] {
        state.withLock { state in
            state.running.filter { !$0.value && !state.handingOver.contains($0.key) }.map(\.key).sorted()
        }
    }

    /// Marks a sink as expected, before its worker starts.
    public func expect(_ sink: String) {
        state.withLock { state in
            if state.running[sink] == nil { state.running[sink] = false }
        }
    }

    /// Marks a sink a reload is changing (see `State.handingOver`), until a worker runs for
    /// it or it is forgotten; `false` ends the mark (a reload that changed nothing).
    public func handOver(_ sink: String, _ value: Bool = true) {
        state.withLock { state in
            if value { state.handingOver.insert(sink) } else { state.handingOver.remove(sink) }
        }
    }

    /// Forgets a sink that a reload removed, once its worker has stopped.
    public func forget(_ sink: String) {
        state.withLock { state in
            state.running[sink] = nil
            state.handingOver.remove(sink)
        }
    }
}
