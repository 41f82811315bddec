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

    public init(options: Options, logger: Logger = Logger(label: "gateway.sink.exec")) {
        self.options = options
        self.maxBatchSize = options.maxBatchSize
        self.logger = logger
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
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    public func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
        let process = try child.withLock { child in
            if let running = child, running.isRunning { return running }
            // A plugin that died is let go of, its pipes with it, before the next starts.
            child?.retire()
            child = try ExecChild(command: options.command, logger: logger)
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
        do {
            // One deadline for the whole batch: a plugin that stops reading its stdin fills
            // the pipe (64 KB) and would block the write as long as it lives.
            let deadline = ContinuousClock.now + options.timeout
            try await process.write(input, until: deadline)
            while outcomes.count < records.count {
                let line = try await process.readLine(until: deadline)
                guard let ack = try? JSONValue.parse(Data(line.utf8)), case .string(let id)? = ack["record_id"] else {
                    throw Failure(description: "exec sink: unreadable acknowledgement")
                }
                // An id not in this batch (a typo, an ack repeated from an earlier batch)
                // counted towards it, and every later batch's last record was sent again.
                guard batch.contains(id) else { continue }
                let reason: String = if case .string(let text)? = ack["reason"] { text } else { "" }
                switch ack["status"] {
                case .string("ok"): outcomes[id] = .delivered
                case .string("reject"): outcomes[id] = .reject(reason: reason.isEmpty ? "rejected by plugin" : reason)
                default: outcomes[id] = .retry(reason: reason.isEmpty ? "plugin asked to retry" : reason)
                }
            }
            return records.map { outcomes[$0.recordID] ?? .retry(reason: "plugin did not acknowledge") }
        } catch {
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

/// One running plugin process and a line reader over its stdout.
final class ExecChild: @unchecked Sendable {
    private let process: ChildProcess
    private let stdin = Pipe()
    private let stdout = Pipe()
    private let lock = NSLock()
    private var buffer = Data()
    /// A read of stdout is blocked on a Dispatch thread (its handle must stay open until it returns).
    private var reading = false
    /// The sink let go of this plugin: its stdout is closed once no read holds it.
    private var retired = false
    /// A thread already waits to reap the plugin.
    private var reaping = false

    init(command: [String], logger: Logger) throws {
        // Writing to a plugin that just died must be an error to handle, not a signal that
        // ends the gateway.
        signal(SIGPIPE, SIG_IGN)
        let stderr = Pipe()
        // A group of its own: a child of the plugin holding stdout open would otherwise
        // outlive it (see `stop`).
        process = try ChildProcess(
            executable: "/usr/bin/env", arguments: command,
            stdin: .descriptor(stdin.fileHandleForReading.fileDescriptor),
            stdout: .descriptor(stdout.fileHandleForWriting.fileDescriptor),
            stderr: .descriptor(stderr.fileHandleForWriting.fileDescriptor), newProcessGroup: true)
        // The plugin's ends are its own now: the gateway holding stdout's write end would
        // never see the plugin's end as EOF.
        try? stdin.fileHandleForReading.close()
        try? stdout.fileHandleForWriting.close()
        try? stderr.fileHandleForWriting.close()
        PluginStderr.forward(stderr.fileHandleForReading, to: logger)
    }

    var isRunning: Bool { process.isRunning }

    /// Writes `data` to the plugin's stdin; throws when it fails or is not done by
    /// `deadline`, when the plugin is stopped, which ends the blocked write too.
    func write(_ data: Data, until deadline: ContinuousClock.Instant) async throws {
        let handle = stdin.fileHandleForWriting
        let written = await Self.first(by: deadline) { () -> Result<Void, any Error> in
            Result { try handle.write(contentsOf: data) }
        }
        guard let written else {
            stop()
            throw ExecSink.Failure(description: "exec sink: plugin timed out (not reading its input)")
        }
        try written.get()
    }

    /// `work`'s result, run on a Dispatch thread (it blocks on a pipe), or nil when
    /// `deadline` or the task's cancellation (shutdown) comes first. Not a task group,
    /// which would wait for the losing work: a read or write blocked on a plugin that
    /// neither answers nor closes its pipe is never cancelled, only ended by stopping the
    /// plugin.
    static func first<T: Sendable>(
        by deadline: ContinuousClock.Instant, _ work: @escaping @Sendable () -> T
    ) async -> T? {
        let remaining = deadline - ContinuousClock.now
        guard remaining > .zero else { return nil }
        let answer = FirstAnswer<T>()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                // Cancelled before it began: the pipe is not touched at all.
                guard answer.await(continuation) else { return }
                DispatchQueue.global().async { answer.give(work()) }
                DispatchQueue.global().asyncAfter(deadline: .now() + remaining / .seconds(1)) { answer.give(nil) }
            }
        } onCancel: {
            answer.give(nil)
        }
    }

    /// The next line of stdout; throws at EOF (the plugin died) or after `deadline`.
    func readLine(until deadline: ContinuousClock.Instant) async throws -> String {
        while true {
            if let line = takeLine() { return line }
            guard deadline > ContinuousClock.now else { throw ExecSink.Failure(description: "exec sink: plugin timed out") }
            // Whichever comes first, the read or the deadline (a child of the plugin may
            // hold its stdout open).
            let handle = stdout.fileHandleForReading
            let chunk = await Self.first(by: deadline) { [self] in
                // Marked under the lock, or not read at all once retired (its handle closed):
                // a read `first` never started cannot leave the mark behind.
                guard lock.withLock({ () -> Bool in
                    if retired { return false }
                    reading = true
                    return true
                }) else { return Data() }
                let chunk = handle.availableData
                if lock.withLock({ reading = false; return retired }) { closeStdout() }
                return chunk
            }
            guard let chunk else {
                stop()  // unblocks the pending read
                throw ExecSink.Failure(description: "exec sink: plugin timed out")
            }
            guard !chunk.isEmpty else { throw ExecSink.Failure(description: "exec sink: plugin exited") }
            lock.withLock { buffer.append(chunk) }
        }
    }

    private func takeLine() -> String? {
        lock.withLock {
            guard let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
            let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
            buffer = Data(buffer[buffer.index(after: newline)...])
            return line
        }
    }

    func stop() {
        // The plugin's process group with it: a child of the plugin holding stdout open
        // would otherwise outlive it, and keep a read blocked on one of Dispatch's threads
        // until it exits. A plugin already reaped is not signalled: its id may be another
        // process's, or another group's, by then (`ChildProcess` sees to it).
        process.signal(SIGKILL, group: true)
        // Reaped off the caller's thread, once; a zombie would otherwise stay until the
        // gateway ends.
        if lock.withLock({ () -> Bool in
            defer { reaping = true }
            return !reaping
        }) {
            DispatchQueue.global().async { [process] in process.waitUntilExit() }
        }
        try? stdin.fileHandleForWriting.close()
    }

    /// Stops the plugin for good and closes the gateway's ends of its pipes: a plugin
    /// restarted after each death (one that crashes on a record is retried up to
    /// `max_attempts` times) left its stdout open each time, until the gateway ran out of
    /// descriptors and stopped. A read still blocked on stdout (a child of the plugin can
    /// hold it open) closes it when it returns: closing it under the read would fail it.
    func retire() {
        stop()
        if lock.withLock({ retired = true; return !reading }) { closeStdout() }
    }

    private func closeStdout() {
        try? stdout.fileHandleForReading.close()
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
        if !isProgram(resolved[0]) {
            reader.report("names no program this machine can run: \(resolved[0]) (not found, or not executable)", key: "command")
        }
        for (word, file) in zip(command, resolved) where word != file && !FileManager.default.fileExists(atPath: file) {
            reader.report("names \(word), relative to config.yaml's folder, and there is no \(file)", key: "command")
        }
        return Options(command: resolved, timeout: .milliseconds(timeout), maxBatchSize: batch)
    }

    /// A path to an executable file, or a name found on `PATH` (as `/usr/bin/env` runs it).
    static func isProgram(_ name: String) -> Bool {
        if name.contains("/") { return FileManager.default.isExecutableFile(atPath: name) }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        return path.split(separator: ":").contains { folder in
            FileManager.default.isExecutableFile(atPath: "\(folder)/\(name)")
        }
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
