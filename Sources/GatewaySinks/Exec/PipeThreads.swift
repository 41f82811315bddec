import Foundation

/// A plugin's pipes, read and written on threads of their own, polling so that a stop is
/// seen within a second (a reader) or 100 ms (a write). Never on Dispatch's threads: on
/// Linux Swift's tasks run on those, and a read blocked for good on a pipe that a plugin's
/// daemon held open (started in a session of its own, out of reach of the group kill)
/// would take one of them at each restart, until every request and the shutdown stalled.
enum PipeThreads {
    /// How long one `poll` waits before the thread looks at its stop condition again: a
    /// reader, which idles beside every running plugin, polls rarely so that idle sinks
    /// cost next to no CPU; a write, which lasts one batch, polls more often.
    static let readPollMilliseconds: Int32 = 1000
    static let writePollMilliseconds: Int32 = 100

    /// Reads `handle` until its end or until `stopped` says so, handing each chunk to
    /// `chunk`; then closes it and calls `end`.
    static func read(
        _ handle: FileHandle, name: String, stopped: @escaping @Sendable () -> Bool,
        chunk: @escaping @Sendable (Data) -> Void, end: @escaping @Sendable () -> Void
    ) {
        let thread = Thread {
            let fd = handle.fileDescriptor
            var bytes = [UInt8](repeating: 0, count: 64 * 1024)
            while !stopped() {
                var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let ready = poll(&descriptor, 1, readPollMilliseconds)
                if ready < 0, errno == EINTR { continue }
                if ready < 0 { break }
                if ready == 0 { continue }
                let count = bytes.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress, $0.count) }
                if count > 0 {
                    chunk(Data(bytes[0..<count]))
                    continue
                }
                if count < 0, errno == EINTR || errno == EAGAIN { continue }
                break  // the end of the pipe, or an error: nothing more will come
            }
            try? handle.close()
            end()
        }
        thread.name = name
        thread.start()
    }

    /// How a write ended.
    enum Written: Sendable {
        case done
        /// Not all taken by `deadline`, or `stopped` said so first.
        case timedOut
        case failed(String)
    }

    /// Writes `data` to `fd` (non-blocking) on a thread of its own, by `deadline`.
    static func write(
        _ data: Data, to fd: Int32, until deadline: ContinuousClock.Instant, stopped: @escaping @Sendable () -> Bool
    ) async -> Written {
        let answer = FirstAnswer<Written>()
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                guard answer.await(continuation) else { return }
                let thread = Thread {
                    answer.give(writeAll(data, to: fd, until: deadline, stopped: { stopped() || answer.isGiven }))
                }
                thread.name = "exec-sink-stdin"
                thread.start()
            }
        } onCancel: {
            answer.give(nil)
        }
        return result ?? .timedOut
    }

    static func writeAll(
        _ data: Data, to fd: Int32, until deadline: ContinuousClock.Instant, stopped: () -> Bool
    ) -> Written {
        var offset = 0
        while offset < data.count {
            if stopped() || ContinuousClock.now >= deadline { return .timedOut }
            let count = data.withUnsafeBytes { bytes in
                Foundation.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            }
            if count > 0 {
                offset += count
                continue
            }
            if count < 0, errno == EINTR { continue }
            if count < 0, errno == EAGAIN {
                var descriptor = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&descriptor, 1, writePollMilliseconds)
                continue
            }
            return .failed(String(cString: strerror(errno)))
        }
        return .done
    }
}
