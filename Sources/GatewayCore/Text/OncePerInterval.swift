import Synchronization

/// Lets something through at most once per interval: a warning about a lasting fault
/// (a full disk, a sink row that keeps failing) that would otherwise be logged on every
/// commit.
public final class OncePerInterval: Sendable {
    private let interval: Duration
    private let last = Mutex<ContinuousClock.Instant?>(nil)

    public init(_ interval: Duration) {
        self.interval = interval
    }

    /// True the first time, then again only once more than `interval` has passed since the last true.
    public func allow() -> Bool {
        last.withLock { last in
            guard last.map({ $0.duration(to: .now) > interval }) ?? true else { return false }
            last = .now
            return true
        }
    }
}
