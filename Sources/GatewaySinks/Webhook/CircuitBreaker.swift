import Foundation
import Synchronization

/// Stops calling an endpoint that keeps failing: after `threshold` consecutive failures
/// the circuit opens for `coolDown`; then one call is let through, and its result closes
/// or reopens it. The worker's own backoff still applies on top.
final class CircuitBreaker: Sendable {
    let threshold: Int
    let coolDown: TimeInterval
    private let state = Mutex<(failures: Int, openUntil: Date?)>((0, nil))

    init(threshold: Int, coolDown: TimeInterval) {
        self.threshold = threshold
        self.coolDown = coolDown
    }

    /// When the circuit is open, the moment it half-opens; nil when calls may go through.
    func blockedUntil(now: Date) -> Date? {
        state.withLock { state in
            guard let until = state.openUntil, until > now else { return nil }
            return until
        }
    }

    func recordSuccess() {
        state.withLock { $0 = (0, nil) }
    }

    func recordFailure(now: Date) {
        state.withLock { state in
            state.failures += 1
            if state.failures >= threshold {
                state.openUntil = now.addingTimeInterval(coolDown)
            }
        }
    }
}
