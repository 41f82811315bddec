import Logging
import Synchronization

/// The process's log level as it stands: `server.log_level` at the start, then each
/// reload's. Log handlers made with it read it at every line, so a reload can turn
/// `debug` on for a while without a restart; a logger given a level of its own keeps it.
public final class LiveLogLevel: Sendable {
    private let current: Atomic<Int>

    public init(_ level: Logger.Level) {
        current = Atomic(Self.levels.firstIndex(of: level) ?? 0)
    }

    private static let levels = Logger.Level.allCases

    public var level: Logger.Level {
        Self.levels[current.load(ordering: .relaxed)]
    }

    public func set(_ level: Logger.Level) {
        current.store(Self.levels.firstIndex(of: level) ?? 0, ordering: .relaxed)
    }
}
