import Foundation
import GatewayCore
import GatewaySpawn
import Logging
import Synchronization

/// One running plugin process: its stdin written and its stdout read on threads of their
/// own (see ``PipeThreads``), its output kept as it comes, so that a plugin answering while
/// the batch is still being written never blocks on a full stdout (which would deadlock
/// both sides on a large batch), and its answers read before a failure stand.
final class ExecChild: Sendable {
    private let process: ChildProcess
    private let stdin: FileHandle
    fileprivate struct State {
        var splitter = LineSplitter(maxLineBytes: ExecChild.maxLineBytes)
        /// Lines read and not taken yet, from `next` on, each with what it holds of memory
        /// as counted in `unreadBytes`.
        var lines: [(text: String, cost: Int)] = []
        var next = 0
        var unreadBytes = 0
        /// Why the plugin's output is read no more: a line without end. The plugin is
        /// stopped at the next read.
        var overflow: String?
        /// The plugin's stdout ended: it died, or closed it.
        var ended = false
        /// A batch is being written, and whether its write ran out of time (the plugin is
        /// then stopped, and its stdout's end must not read as an exit) or failed (the
        /// plugin closed its input: said when the batch times out).
        var writing = false
        var writeTimedOut = false
        var writeFailure: String?
        /// The sink let go of this plugin: its readers stop.
        var retiredAt: ContinuousClock.Instant?
        /// A thread already waits to reap the plugin.
        var reaping = false
        /// Whoever waits for more output.
        var waiter: FirstAnswer<Void>?
    }
    private let state = Mutex(State())
    /// How long the stderr reader goes on after the plugin is let go of, for its last lines.
    static let stderrGrace: Duration = .seconds(1)
    /// The longest stdout line held (an acknowledgement is about 100 bytes), and the most
    /// output read ahead of the gateway's taking it: a plugin printing without end must
    /// not take the gateway's memory. Past the second the reader waits, as a full pipe
    /// makes the plugin wait; stopped there instead, a plugin answering a large batch with
    /// long reasons faster than they were taken would be sent its records again.
    static let maxLineBytes = 1 << 20
    static let maxUnreadBytes = 16 << 20
    /// What a line costs beyond its bytes: counted as nothing, empty or short lines would
    /// grow the gateway's memory far past the bound on unread output.
    static let lineOverhead = 64
    /// Why a batch failed whose plugin did not take its input in time.
    static let notReadingInput = "exec sink: plugin timed out (not reading its input)"

    init(command: [String], stderrLimit: PluginStderr.Limit) throws {
        // Writing to a plugin that just died must be an error to handle, not a signal that
        // ends the gateway.
        signal(SIGPIPE, SIG_IGN)
        let input = Pipe(), output = Pipe(), errors = Pipe()
        // A group of its own: a child of the plugin holding stdout open would otherwise
        // outlive it (see `stop`).
        // Started itself, not through `/usr/bin/env`, which reads a first word with a `=` in
        // it (`./fwd=v2.py`) as a variable to set, and printed the whole environment, the
        // sink's secrets with it, to stdout, whence the gateway would log it.
        process = try ChildProcess(
            executable: ExecSinkPlugin.programPath(command[0]) ?? command[0], arguments: Array(command.dropFirst()),
            stdin: .descriptor(input.fileHandleForReading.fileDescriptor),
            stdout: .descriptor(output.fileHandleForWriting.fileDescriptor),
            stderr: .descriptor(errors.fileHandleForWriting.fileDescriptor), newProcessGroup: true)
        // The plugin's ends are its own now: the gateway holding stdout's write end would
        // never see the plugin's end as EOF.
        try? input.fileHandleForReading.close()
        try? output.fileHandleForWriting.close()
        try? errors.fileHandleForWriting.close()
        stdin = input.fileHandleForWriting
        let fd = stdin.fileDescriptor
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        // The readers hold the plugin until they end, within a second of its retirement.
        PipeThreads.read(
            output.fileHandleForReading, name: "exec-sink-stdout",
            stopped: { [self] in state.withLock { $0.retiredAt != nil } },
            chunk: { [self] data in
                state.withLock { state -> FirstAnswer<Void>? in
                    guard state.overflow == nil else { return nil }
                    state.take(data)
                    defer { state.waiter = nil }
                    return state.waiter
                }?.give(())
                // On the reader's own thread, for as long as it is full: a short poll while a
                // batch takes lines, longer ones when none does, so that an idle sink costs
                // next to no CPU.
                var pause: useconds_t = 1_000
                while state.withLock({ $0.isFull }) {
                    usleep(pause)
                    pause = min(pause * 2, 100_000)
                }
            },
            end: { [self] in
                state.withLock { state -> FirstAnswer<Void>? in
                    state.ended = true
                    defer { state.waiter = nil }
                    return state.waiter
                }?.give(())
            })
        PluginStderr.forward(errors.fileHandleForReading, to: stderrLimit) { [self] in
            state.withLock { $0.retiredAt.map { ContinuousClock.now - $0 > Self.stderrGrace } ?? false }
        }
    }

    var isRunning: Bool { process.isRunning }

    /// Writes `data` to the plugin's stdin; throws when it fails or is not done by
    /// `deadline` (the plugin is then stopped).
    func write(_ data: Data, until deadline: ContinuousClock.Instant) async throws {
        state.withLock { state in
            state.writing = true
            state.writeTimedOut = false
            state.writeFailure = nil
        }
        let written = await PipeThreads.write(
            data, to: stdin.fileDescriptor, until: deadline,
            stopped: { [self] in state.withLock { $0.retiredAt != nil } })
        // Kept for the reader before any stop it causes is seen.
        state.withLock { state in
            state.writing = false
            switch written {
            case .done: break
            case .timedOut: state.writeTimedOut = true
            case .failed(let reason):
                state.writeFailure = "exec sink: writing to the plugin failed: \(reason) (it closed its input)"
            }
        }
        switch written {
        case .done:
            return
        case .timedOut:
            stop()
            throw ExecSink.Failure(description: Self.notReadingInput)
        case .failed(let reason):
            throw ExecSink.Failure(description: "exec sink: writing to the plugin failed: \(reason)")
        }
    }

    /// The next line of stdout; throws at its end (the plugin died), after `deadline`, or
    /// at a shutdown. The deadline holds while lines keep coming: a plugin printing lines
    /// that are no acknowledgement must not keep its batch going for good; those read
    /// in time are taken by ``takeLines()`` after the failure.
    func readLine(until deadline: ContinuousClock.Instant) async throws -> String {
        while true {
            guard deadline > ContinuousClock.now, !Task.isCancelled else {
                stop()
                throw ExecSink.Failure(description: state.withLock { $0.timeoutReason })
            }
            let (line, ended, overflow, writeTimedOut) = state.withLock { state in
                (state.nextLine(), state.ended, state.overflow, state.writeTimedOut)
            }
            if let line { return line }
            if let overflow {
                stop()
                throw ExecSink.Failure(description: "exec sink: plugin stopped: it wrote \(overflow)")
            }
            if ended {
                // Stopped for not reading its input, not exited of its own accord.
                throw ExecSink.Failure(
                    description: writeTimedOut
                        ? Self.notReadingInput : "exec sink: plugin exited")
            }
            guard deadline > ContinuousClock.now, await moreOutput(until: deadline) else {
                stop()
                throw ExecSink.Failure(description: state.withLock { $0.timeoutReason })
            }
        }
    }

    /// The complete lines read so far and not taken: answers that stand when the batch
    /// fails after them.
    func takeLines() -> [String] {
        state.withLock { state in
            var lines: [String] = []
            while let line = state.nextLine() { lines.append(line) }
            return lines
        }
    }

    /// Waits until more output or the end has come (true), or `deadline` or the task's
    /// cancellation (shutdown) first (false).
    private func moreOutput(until deadline: ContinuousClock.Instant) async -> Bool {
        let remaining = deadline - ContinuousClock.now
        guard remaining > .zero else { return false }
        let answer = FirstAnswer<Void>()
        let came: Void? = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                guard answer.await(continuation) else { return }
                // Output that came since the caller looked is answered at once.
                let waiting = self.state.withLock { state -> Bool in
                    guard !state.ended, state.overflow == nil, state.next == state.lines.count else { return false }
                    state.waiter = answer
                    return true
                }
                guard waiting else { return answer.give(()) }
                DispatchQueue.global().asyncAfter(deadline: .now() + remaining / .seconds(1)) { answer.give(nil) }
            }
        } onCancel: {
            answer.give(nil)
        }
        return came != nil
    }

    func stop() {
        // The plugin's process group with it: a child of the plugin holding stdout open
        // would otherwise outlive it. A plugin already reaped is not signalled: its id may
        // be another process's, or another group's, by then (`ChildProcess` sees to it).
        process.signal(SIGKILL, group: true)
        // Reaped off the caller's thread, once; a zombie would otherwise stay until the
        // gateway ends. Killed, it exits at once.
        if state.withLock({ state -> Bool in
            defer { state.reaping = true }
            return !state.reaping
        }) {
            let process = process
            Thread { process.waitUntilExit() }.start()
        }
    }

    /// Once its threads have ended, none can be writing to stdin: closed under a write, its
    /// number could be another file's by the time the write ran.
    deinit {
        try? stdin.close()
    }

    /// Stops the plugin for good; its readers see it within a second and close the gateway's
    /// ends of its pipes (a plugin restarted after each death, one crashing on a record up
    /// to `max_attempts` times, left its stdout open each time, until the gateway ran out
    /// of descriptors), even while a process the plugin started holds them open.
    func retire() {
        stop()
        state.withLock { state in
            if state.retiredAt == nil { state.retiredAt = .now }
        }
    }
}

extension ExecChild.State {
    /// Takes a chunk of stdout in: its complete lines queued, and the output no longer read
    /// once a line passes its bound.
    mutating func take(_ chunk: Data) {
        let split = splitter.split(chunk)
        for bytes in split.lines {
            let cost = bytes.count + ExecChild.lineOverhead
            lines.append((String(decoding: bytes, as: UTF8.self), cost))
            unreadBytes += cost
        }
        if split.tooLong { overflow = "a line of over \(ExecChild.maxLineBytes) bytes" }
    }

    /// The reader waits, and the plugin with it once the pipe is full: what it wrote and
    /// the gateway has not taken yet has reached its bound.
    var isFull: Bool { unreadBytes > ExecChild.maxUnreadBytes && overflow == nil && retiredAt == nil }

    /// Why a batch ends unanswered at its deadline.
    var timeoutReason: String {
        // The gateway taking answers slower than they came, its reader waiting, held the
        // plugin on its stdout and so off its input: not the plugin's fault.
        if unreadBytes > ExecChild.maxUnreadBytes {
            return "exec sink: plugin timed out (its answers came faster than they were taken: "
                + "lower max_batch_size or raise timeout_ms)"
        }
        if writing || writeTimedOut { return ExecChild.notReadingInput }
        return writeFailure ?? "exec sink: plugin timed out"
    }

    /// The next line not taken; once stdout has `ended`, what is left without a line break
    /// is the last line (a final acknowledgement printed without one would be dropped, and
    /// its record sent again).
    mutating func nextLine() -> String? {
        guard next < lines.count else {
            lines.removeAll(keepingCapacity: true)
            next = 0
            guard ended, overflow == nil, let last = splitter.takePartial() else { return nil }
            return String(decoding: last, as: UTF8.self)
        }
        let (line, cost) = lines[next]
        unreadBytes -= cost
        next += 1
        // Lines taken are let go of in halves: kept until the queue emptied, a plugin
        // staying just ahead of the reader would hold every line it had written.
        if next >= 1024, next * 2 >= lines.count {
            lines.removeFirst(next)
            next = 0
        }
        return line
    }
}
