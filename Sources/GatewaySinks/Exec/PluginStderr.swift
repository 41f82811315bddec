import Foundation
import Logging

/// A plugin's stderr, as warnings in the gateway's log. Inherited, a Python traceback
/// went into the log as raw lines, breaking `log_format: json`'s one object per line.
/// Each line is one entry, at most 1 KiB, and at most 100 a minute: a plugin printing in
/// a loop must not flood the log.
enum PluginStderr {
    static let maxLineBytes = 1024
    static let linesPerMinute = 100

    /// Reads `handle` on a Dispatch thread until the plugin and everything it started
    /// have closed it, then closes it.
    static func forward(_ handle: FileHandle, to logger: Logger) {
        DispatchQueue.global().async {
            var lines = LineLimiter(logger: logger)
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    lines.emit(pending[pending.startIndex..<newline])
                    pending = Data(pending[pending.index(after: newline)...])
                }
                // A line with no end in sight is logged in parts.
                if pending.count > maxLineBytes {
                    lines.emit(pending)
                    pending = Data()
                }
            }
            if !pending.isEmpty { lines.emit(pending) }
            lines.flushDropped()
            try? handle.close()
        }
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
