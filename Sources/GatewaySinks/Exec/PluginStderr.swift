import Foundation
import Logging
import Synchronization

/// A plugin's stderr, as warnings in the gateway's log. Inherited, a Python traceback
/// went into the log as raw lines, breaking `log_format: json`'s one object per line.
/// Each line is one entry, at most 1 KiB, and at most 100 a minute for the sink, however
/// often its plugin restarts: a plugin printing in a loop, or crashing in one, must not
/// flood the log.
enum PluginStderr {
    /// A sink's limit, shared by the plugins it runs one after another.
    final class Limit: Sendable {
        let lines: Mutex<LineLimiter>
        /// The sink has stopped: a plugin's reader ending after it tells its drops at once.
        private let stopped = Mutex(false)
        init(logger: Logger) { lines = Mutex(LineLimiter(logger: logger)) }
        /// Tells the lines dropped since the last count: the sink stopping.
        func stop() {
            stopped.withLock { $0 = true }
            lines.withLock { $0.flushDropped() }
        }
        /// A plugin's stderr ended: its drops are told now only once the sink has stopped.
        func ended() {
            if stopped.withLock({ $0 }) { lines.withLock { $0.flushDropped() } }
        }
    }

    static let maxLineBytes = 1024
    static let linesPerMinute = 100

    /// Reads `handle` on a thread of its own (see ``PipeThreads``) until the plugin and
    /// everything it started have closed it, or `stopped` says so (shortly after the
    /// plugin is let go of: a process it started may hold stderr for good), then closes it.
    static func forward(_ handle: FileHandle, to limit: Limit, stopped: @escaping @Sendable () -> Bool = { false }) {
        let splitter = Mutex(LineSplitter(maxLineBytes: maxLineBytes))
        PipeThreads.read(
            handle, name: "exec-sink-stderr",
            stopped: {
                // Asked at least once a second: a minute's count of lines dropped is told when
                // the minute ends, not only at the next line after it.
                limit.lines.withLock { $0.rollOver() }
                return stopped()
            },
            chunk: { chunk in
                let split = splitter.withLock { $0.split(chunk) }
                // A line with no end in sight is logged in parts.
                let complete = split.lines + (split.overlong.map { [$0] } ?? [])
                limit.lines.withLock { lines in complete.forEach { lines.emit($0) } }
            },
            end: {
                // The count of lines dropped is told when the minute rolls over, or at the
                // sink's stop: told at each plugin's end, a plugin crashing in a loop would
                // log one count line per restart.
                if let last = splitter.withLock({ $0.takePartial() }) { limit.lines.withLock { $0.emit(last) } }
                limit.ended()
            })
    }

    struct LineLimiter {
        let logger: Logger
        var windowStart = ContinuousClock.now
        var logged = 0
        var dropped = 0

        mutating func emit(_ bytes: Data) {
            rollOver()
            guard logged < PluginStderr.linesPerMinute else {
                dropped += 1
                return
            }
            logged += 1
            let text = String(decoding: bytes.prefix(PluginStderr.maxLineBytes), as: UTF8.self)
            logger.warning("plugin stderr", metadata: ["line": .string(text)])
        }

        /// Starts a new minute once the last has ended, telling what it dropped.
        mutating func rollOver() {
            guard ContinuousClock.now - windowStart >= .seconds(60) else { return }
            flushDropped()
            windowStart = ContinuousClock.now
            logged = 0
        }

        mutating func flushDropped() {
            guard dropped > 0 else { return }
            logger.warning("plugin stderr lines dropped", metadata: ["lines": "\(dropped)"])
            dropped = 0
        }
    }
}
