import Foundation
import GatewayCore
import GatewaySpawn
import Logging
import Synchronization

/// Runs an operator's program (any language) and speaks newline-delimited JSON with it:
/// each record goes to its stdin as one line, and the program answers one line per
/// record on stdout: `{"record_id": "…", "status": "ok" | "retry" | "reject", "reason": "…"}`.
///
/// The program is started on first use and again after it dies; a batch it does not
/// fully answer within `timeout` is retried (and the program restarted), so a hung
/// plugin delays delivery but loses nothing.
public final class ExecSink: AttributionSink {
    public struct Options: Sendable {
        public var command: [String]
        public var timeout: Duration
        public var maxBatchSize: Int

        public init(command: [String], timeout: Duration = .seconds(30), maxBatchSize: Int = 100) {
            self.command = command
            self.timeout = timeout
            self.maxBatchSize = maxBatchSize
        }
    }

    public let maxBatchSize: Int
    let options: Options
    let logger: Logger
    /// The running program; the worker calls `deliver` one batch at a time.
    private let child = Mutex<ExecChild?>(nil)
    /// Lines on stdout that are not acknowledgements, shown at most once a minute.
    private let unreadableLines = OncePerInterval(.seconds(60))
    /// The plugins' stderr lines, limited for the sink, not for each plugin process.
    private let stderrLimit: PluginStderr.Limit

    public init(options: Options, logger: Logger = Logger(label: "gateway.sink.exec")) {
        self.options = options
        self.maxBatchSize = options.maxBatchSize
        self.logger = logger
        stderrLimit = PluginStderr.Limit(logger: logger)
    }

    deinit {
        child.withLock { $0?.retire() }
    }

    /// The plugin, and what it started, end with the gateway: in a group of its own, the
    /// terminal's Ctrl-C does not reach it, and left running it went on beside the
    /// copy the next start began.
    public func shutdown() async {
        child.withLock { child in
            child?.retire()
            child = nil
        }
        stderrLimit.stop()
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    public func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
        let process = try child.withLock { child in
            if let running = child, running.isRunning { return running }
            // A plugin that died is let go of, its pipes with it, before the next starts.
            child?.retire()
            child = try ExecChild(command: options.command, stderrLimit: stderrLimit)
            return child!
        }
        let encoder = AttributionRecord.makeEncoder()
        var input = Data()
        for record in records {
            input.append(try encoder.encode(record))
            input.append(UInt8(ascii: "\n"))
        }
        var outcomes: [String: DeliveryOutcome] = [:]
        let batch = Set(records.map(\.recordID))
        func take(_ line: String) {
            guard let ack = try? JSONValue.parse(Data(line.utf8)), case .string(let id)? = ack["record_id"] else {
                // A banner or a debug print on stdout failed the whole batch, acknowledged
                // records and all, at every start (review 66): it is skipped, and shown.
                if unreadableLines.allow() {
                    logger.warning(
                        "exec sink: a line on the plugin's stdout is not an acknowledgement; skipped",
                        metadata: ["line": .string(String(line.prefix(200)))])
                }
                return
            }
            // An id not in this batch (a typo, an ack repeated from an earlier batch)
            // counted towards it, and every later batch's last record was sent again.
            guard batch.contains(id) else { return }
            let reason: String = if case .string(let text)? = ack["reason"] { text } else { "" }
            switch ack["status"] {
            case .string("ok"): outcomes[id] = .delivered
            case .string("reject"): outcomes[id] = .reject(reason: reason.isEmpty ? "rejected by plugin" : reason)
            default: outcomes[id] = .retry(reason: reason.isEmpty ? "plugin asked to retry" : reason)
            }
        }
        do {
            // One deadline for the whole batch: a plugin that stops reading its stdin fills
            // the pipe (64 KB) and would block the write as long as it lives.
            let deadline = ContinuousClock.now + options.timeout
            try await withThrowingTaskGroup(of: Void.self) { group in
                // Answers are taken while the batch is written: held until the write ended,
                // 5,000 acknowledgements with long reasons passed the unread bound, and the
                // plugin was stopped with its answers not all read (review 69).
                group.addTask { [input] in try await process.write(input, until: deadline) }
                while outcomes.count < records.count { take(try await process.readLine(until: deadline)) }
                // Every record answered: what the plugin does with the rest of its input
                // (closing it, exiting) changes nothing.
                _ = await group.nextResult()
            }
            return records.map { outcomes[$0.recordID] ?? .retry(reason: "plugin did not acknowledge") }
        } catch {
            // Answers read before the failure stand, those that came while the batch was
            // still being written too (a slow plugin's acknowledgements were dropped with
            // a write that timed out, and their records sent again).
            for line in process.takeLines() { take(line) }
            // A plugin that dies, hangs or talks nonsense is restarted for the next batch;
            // what it acknowledged before that stands, the rest is retried.
            child.withLock { child in
                child?.retire()
                child = nil
            }
            guard !outcomes.isEmpty else { throw error }
            return records.map { outcomes[$0.recordID] ?? .retry(reason: "\(error)") }
        }
    }
}

extension ExecChild.State {
    /// Takes a chunk of stdout in: its complete lines queued, and the output no longer read
    /// once a line passes its bound.
    mutating func take(_ chunk: Data) {
        let split = splitter.split(chunk)
        for bytes in split.lines {
            lines.append(String(decoding: bytes, as: UTF8.self))
            costs.append(bytes.count + ExecChild.lineOverhead)
            unreadBytes += costs[costs.count - 1]
        }
        if split.tooLong { overflow = "a line of over \(ExecChild.maxLineBytes) bytes" }
    }

    /// The reader waits, and the plugin with it once the pipe is full: what it wrote and
    /// the gateway has not taken yet has reached its bound.
    var isFull: Bool { unreadBytes > ExecChild.maxUnreadBytes && overflow == nil && retiredAt == nil }

    /// Why a batch ends unanswered at its deadline.
    var timeoutReason: String {
        // The gateway taking answers slower than they came, its reader waiting, held the
        // plugin on its stdout and so off its input: not the plugin's fault (review 71).
        if unreadBytes > ExecChild.maxUnreadBytes {
            return "exec sink: plugin timed out (its answers came faster than they were taken: lower max_batch_size or raise timeout_ms)"
        }
        if writing || writeTimedOut { return "exec sink: plugin timed out (not reading its input)" }
        return writeFailure ?? "exec sink: plugin timed out"
    }

    /// The next line not taken; once stdout has `ended`, what is left without a line break
    /// is the last line (a final acknowledgement printed without one was dropped, and its
    /// record sent again, review 70).
    mutating func nextLine() -> String? {
        guard next < lines.count else {
            lines.removeAll(keepingCapacity: true)
            costs.removeAll(keepingCapacity: true)
            next = 0
            guard ended, overflow == nil, let last = splitter.takePartial() else { return nil }
            return String(decoding: last, as: UTF8.self)
        }
        let line = lines[next]
        unreadBytes -= costs[next]
        next += 1
        // Lines taken are let go of in halves: kept until the queue emptied, a plugin
        // staying just ahead of the reader held every line it had written (review 69).
        if next >= 1024, next * 2 >= lines.count {
            lines.removeFirst(next)
            costs.removeFirst(next)
            next = 0
        }
        return line
    }
}

/// One running plugin process: its stdin written and its stdout read on threads of their
/// own (see ``PipeThreads``), its output kept as it comes, so that a plugin answering while
/// the batch is still being written never blocks on a full stdout (a batch of 5,000
/// deadlocked both sides, review 66), and its answers read before a failure stand.
final class ExecChild: Sendable {
    private let process: ChildProcess
    private let stdin: FileHandle
    fileprivate struct State {
        var splitter = LineSplitter(maxLineBytes: ExecChild.maxLineBytes)
        /// Lines read and not taken yet, from `next` on.
        var lines: [String] = []
        /// What each line holds of memory, as counted in `unreadBytes`.
        var costs: [Int] = []
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
    /// makes the plugin wait; stopped there, a plugin answering 5,000 records with 8 KB
    /// reasons faster than they were taken was sent them again (review 70).
    static let maxLineBytes = 1 << 20
    static let maxUnreadBytes = 16 << 20
    /// What a line costs beyond its bytes: empty lines, counted as nothing, grew the
    /// gateway by 40 MB a second, and 16 MiB of `x` lines took 583 MB (review 67).
    static let lineOverhead = 64

    init(command: [String], stderrLimit: PluginStderr.Limit) throws {
        // Writing to a plugin that just died must be an error to handle, not a signal that
        // ends the gateway.
        signal(SIGPIPE, SIG_IGN)
        let input = Pipe(), output = Pipe(), errors = Pipe()
        // A group of its own: a child of the plugin holding stdout open would otherwise
        // outlive it (see `stop`).
        // Started itself, not through `/usr/bin/env`, which reads a first word with a `=` in
        // it (`./fwd=v2.py`) as a variable to set, and printed the whole environment, the
        // sink's secrets with it, to stdout, whence the gateway logged it (review 65).
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
                // batch takes lines, longer ones when none does (2 ms each cost an idle sink
                // 1% of a core, review 71).
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
            data, to: stdin.fileDescriptor, until: deadline, stopped: { [self] in state.withLock { $0.retiredAt != nil } })
        // Kept for the reader before any stop it causes is seen.
        state.withLock { state in
            state.writing = false
            switch written {
            case .done: break
            case .timedOut: state.writeTimedOut = true
            case .failed(let reason): state.writeFailure = "exec sink: writing to the plugin failed: \(reason) (it closed its input)"
            }
        }
        switch written {
        case .done:
            return
        case .timedOut:
            stop()
            throw ExecSink.Failure(description: "exec sink: plugin timed out (not reading its input)")
        case .failed(let reason):
            throw ExecSink.Failure(description: "exec sink: writing to the plugin failed: \(reason)")
        }
    }

    /// The next line of stdout; throws at its end (the plugin died), after `deadline`, or
    /// at a shutdown. The deadline holds while lines keep coming: a plugin printing lines
    /// that are no acknowledgement kept its batch going for good (review 67); those read
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
                    description: writeTimedOut ? "exec sink: plugin timed out (not reading its input)" : "exec sink: plugin exited")
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

/// The first of several answers to one continuation; an answer given before anyone waits
/// (cancellation can come first) is kept for the waiter.
final class FirstAnswer<T: Sendable>: Sendable {
    private enum State {
        case empty
        case waiting(CheckedContinuation<T?, Never>)
        case answered(T?)
        case done
    }
    private let state = Mutex(State.empty)

    /// Waits for the answer; false when it had already come, and `continuation` is resumed.
    func await(_ continuation: CheckedContinuation<T?, Never>) -> Bool {
        let early: T?? = state.withLock { state in
            if case .answered(let value) = state {
                state = .done
                return .some(value)
            }
            state = .waiting(continuation)
            return nil
        }
        guard let early else { return true }
        continuation.resume(returning: early)
        return false
    }

    /// Whether an answer has come (the work can stop).
    var isGiven: Bool {
        state.withLock { state in
            switch state {
            case .answered, .done: true
            case .empty, .waiting: false
            }
        }
    }

    func give(_ value: T?) {
        let waiter: CheckedContinuation<T?, Never>? = state.withLock { state in
            switch state {
            case .empty:
                state = .answered(value)
                return nil
            case .waiting(let continuation):
                state = .done
                return continuation
            case .answered, .done:
                return nil
            }
        }
        waiter?.resume(returning: value)
    }
}

/// Registers the exec sink as `type: exec`.
public enum ExecSinkPlugin: SinkPlugin {
    public typealias Options = ExecSink.Options
    public static let typeName = "exec"

    public static func readOptions(_ reader: ConfigReader, context: SinkContext) -> Options? {
        let command = reader.stringList("command")
        if command?.isEmpty ?? true { reader.report("is required: the program and its arguments", key: "command") }
        let timeout = reader.int("timeout_ms", in: 100...600_000) ?? 30_000
        let batch = reader.int("max_batch_size", in: 1...10_000) ?? 100
        guard let command, !command.isEmpty else { return nil }
        // `./plugins/forward.py` is a file beside config.yaml, as every file the config
        // names is: relative to the working directory, it was missing under systemd (`/`).
        let resolved = command.map { word in
            word.hasPrefix("./") || word.hasPrefix("../") ? reader.resolvedPath(word) : word
        }
        // Found now, not at the first record: a missing program passed `check-config`, the
        // gateway started ready, and every record failed with "Broken pipe" for days.
        if programPath(resolved[0]) == nil {
            reader.report("names no program this machine can run: \(resolved[0]) (not found, or not executable)", key: "command")
        }
        // Every `./` word, even when it reads the same resolved (config.yaml in the working
        // directory): compared with its resolution, a missing file passed there.
        for (word, file) in zip(command, resolved)
        where (word.hasPrefix("./") || word.hasPrefix("../")) && !FileManager.default.fileExists(atPath: file) {
            reader.report("names \(word), relative to config.yaml's folder, and there is no \(file)", key: "command")
        }
        return Options(command: resolved, timeout: .milliseconds(timeout), maxBatchSize: batch)
    }

    /// The executable file `name` names: itself when it has a `/`, else the first found on
    /// `PATH`, as a shell finds it. Never a folder, which is "executable" (searchable) too.
    static func programPath(_ name: String) -> String? {
        func isExecutableFile(_ path: String) -> Bool {
            var folder: ObjCBool = false
            return FileManager.default.fileExists(atPath: path, isDirectory: &folder) && !folder.boolValue
                && FileManager.default.isExecutableFile(atPath: path)
        }
        if name.contains("/") { return isExecutableFile(name) ? name : nil }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        return path.split(separator: ":").lazy.map { "\($0)/\(name)" }.first(where: isExecutableFile)
    }

    public static func makeSink(options: Options, context: SinkContext) async throws -> any AttributionSink {
        var logger = context.logger
        logger[metadataKey: "sink"] = .string(context.name)
        return ExecSink(options: options, logger: logger)
    }

    public static func summary(_ options: Options) -> String {
        "runs \(options.command.first ?? ""), NDJSON over stdin/stdout"
    }
}
