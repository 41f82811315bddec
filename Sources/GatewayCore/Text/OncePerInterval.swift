import Synchronization

/// Lets something through at most once per interval: a warning about a lasting fault
/// (a full disk, a sink row that keeps failing) that would otherwise be logged on every
/// commit.
public final class OncePerInterval: Sendable {
    private let interval: Duration
    private let last = Mutex<(at: ContinuousClock.Instant?, held: Int)>((nil, 0))

    private let now: @Sendable () -> ContinuousClock.Instant

    public init(_ interval: Duration, now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.interval = interval
        self.now = now
    }

    /// True the first time, then again only once more than `interval` has passed since the last true.
    public func allow() -> Bool {
        pass() != nil
    }

    /// Like ``allow()``, and when it lets the call through, how many it held back since
    /// the last one it let through (for a log line to say how many it stands for).
    public func pass() -> Int? {
        last.withLock { last in
            let now = now()
            guard last.at.map({ $0.duration(to: now) > interval }) ?? true else {
                last.held += 1
                return nil
            }
            defer { last = (now, 0) }
            return last.held
        }
    }
}
