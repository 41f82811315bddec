import Synchronization

/// Which sink workers are running, for `/readyz`.
public final class WorkerHealth: Sendable {
    private let running = Mutex<[String: Bool]>([:])

    public init() {}

    func set(_ sink: String, running value: Bool) {
        running.withLock { $0[sink] = value }
    }

    /// Sinks whose worker is registered but not running.
    public var stoppedSinks: [String] {
        running.withLock { state in state.filter { !$0.value }.map(\.key).sorted() }
    }

    /// Forgets a sink that a reload removed, once its worker has stopped.
    public func forget(_ sink: String) {
        running.withLock { $0[sink] = nil }
    }

    /// Marks a sink as expected, before its worker starts.
    public func expect(_ sink: String) {
        running.withLock { state in
            if state[sink] == nil { state[sink] = false }
        }
    }
}
