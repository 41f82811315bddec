import Foundation
import Logging
import Synchronization

/// A plugin's stderr, as warnings in the gateway's log. Inherited, a Python traceback
/// went into the log as raw lines, breaking `log_format: json`'s one object per line.
/// Each line is one entry, at most 1 KiB, and at most 100 a minute: a plugin printing in
/// a loop must not flood the log.
enum PluginStderr {
    static let maxLineBytes = 1024
    static let linesPerMinute = 100

    /// Reads `handle` on a thread of its own (see ``PipeThreads``) until the plugin and
    /// everything it started have closed it, or `stopped` says so (shortly after the
    /// plugin is let go of: a process it started may hold stderr for good), then closes it.
    static func forward(_ handle: FileHandle, to logger: Logger, stopped: @escaping @Sendable () -> Bool = { false }) {
        let reader = Mutex((lines: LineLimiter(logger: logger), pending: Data()))
        PipeThreads.read(
            handle, name: "exec-sink-stderr", stopped: stopped,
            chunk: { chunk in
                reader.withLock { reader in
                    reader.pending.append(chunk)
                    while let newline = reader.pending.firstIndex(of: UInt8(ascii: "\n")) {
                        reader.lines.emit(reader.pending[reader.pending.startIndex..<newline])
                        reader.pending = Data(reader.pending[reader.pending.index(after: newline)...])
                    }
                    // A line with no end in sight is logged in parts.
                    if reader.pending.count > maxLineBytes {
                        reader.lines.emit(reader.pending)
                        reader.pending = Data()
                    }
                }
            },
            end: {
                reader.withLock { reader in
                    if !reader.pending.isEmpty { reader.lines.emit(reader.pending) }
                    reader.lines.flushDropped()
                }
            })
    }

    struct LineLimiter {
        let logger: Logger
        var windowStart = ContinuousClock.now
        var logged = 0
        var dropped = 0

        mutating func emit(_ bytes: Data) {
            if ContinuousClock.now - windowStart >= .seconds(60) {
                flushDropped()
                windowStart = ContinuousClock.now
                logged = 0
            }
            guard logged < PluginStderr.linesPerMinute else {
                dropped += 1
                return
            }
            logged += 1
            let text = String(decoding: bytes.prefix(PluginStderr.maxLineBytes), as: UTF8.self)
            logger.warning("plugin stderr", metadata: ["line": .string(text)])
        }

        mutating func flushDropped() {
            guard dropped > 0 else { return }
            logger.warning("plugin stderr lines dropped", metadata: ["lines": "\(dropped)"])
            dropped = 0
        }
    }
}
