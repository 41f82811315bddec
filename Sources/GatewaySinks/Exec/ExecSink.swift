import Foundation
import GatewayCore
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
        let encoder = AttributionRecord.makeEncoder()
        var input = Data()
        for record in records {
            input.append(try encoder.encode(record))
            input.append(UInt8(ascii: "\n"))
        }
        let (answers, failure) = try await exchange(input, ids: records.map(\.recordID))
        return records.map { record in
            guard let answer = answers[record.recordID] else {
                return .retry(reason: failure.map { "\($0)" } ?? "plugin did not acknowledge")
            }
            switch answer.status {
            case "ok": return .delivered
            case "reject": return .reject(reason: answer.reason.isEmpty ? "rejected by plugin" : answer.reason)
            default: return .retry(reason: answer.reason.isEmpty ? "plugin asked to retry" : answer.reason)
            }
        }
    }

    /// Sends the plugin a `forget` message, acknowledged by its `request_id` as a record is
    /// by its `record_id`; a plugin that cannot forget answers `not_supported`.
    public func forget(_ request: ForgetRequest) async throws -> ForgetOutcome {
        let ids = request.identifiers
        let message: JSONValue = .object([
            "type": .string("forget"), "request_id": .string(request.requestID), "app_id": .string(request.appID),
            "app_user_ids": .array(ids.appUserIDs.map(JSONValue.string)),
            "idfvs": .array(ids.idfvs.map(JSONValue.string)), "idfas": .array(ids.idfas.map(JSONValue.string)),
            "record_ids": .array(ids.recordIDs.map(JSONValue.string)),
        ])
        let (answers, failure) = try await exchange(
            Data(message.compactUTF8 + [UInt8(ascii: "\n")]), ids: [request.requestID], idField: "request_id")
        guard let answer = answers[request.requestID] else {
            return .retry(reason: failure.map { "\($0)" } ?? "plugin did not acknowledge")
        }
        switch answer.status {
        case "ok": return .done
        case "not_supported":
            return .notSupported(reason: answer.reason.isEmpty ? "the plugin cannot forget a user" : answer.reason)
        case "reject": return .failed(reason: answer.reason.isEmpty ? "rejected by plugin" : answer.reason)
        default: return .retry(reason: answer.reason.isEmpty ? "plugin asked to retry" : answer.reason)
        }
    }

    /// Writes `input` (one line per id) and reads the plugin's acknowledgements, by the id
    /// in `idField`, until each id has one; with the error that cut the exchange short,
    /// if any, when some were answered before it (none answered: it throws).
    func exchange(_ input: Data, ids: [String], idField: String = "record_id") async throws -> (
        answers: [String: (status: String?, reason: String)], failure: (any Error)?
    ) {
        let process = try child.withLock { child in
            if let running = child, running.isRunning { return running }
            // A plugin that died is let go of, its pipes with it, before the next starts.
            child?.retire()
            child = try ExecChild(command: options.command, stderrLimit: stderrLimit)
            return child!
        }
        var answers: [String: (status: String?, reason: String)] = [:]
        let batch = Set(ids)
        func take(_ line: String) {
            guard let ack = try? JSONValue.parse(Data(line.utf8)), case .string(let id)? = ack[idField] else {
                // A banner or a debug print on stdout must not fail the whole batch,
                // acknowledged records and all, at every start: it is skipped, and shown.
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
            let status: String? = if case .string(let text)? = ack["status"] { text } else { nil }
            answers[id] = (status, reason)
        }
        do {
            // One deadline for the whole batch: a plugin that stops reading its stdin fills
            // the pipe (64 KB) and would block the write as long as it lives.
            let deadline = ContinuousClock.now + options.timeout
            try await withThrowingTaskGroup(of: Void.self) { group in
                // Answers are taken while the batch is written: held until the write ended,
                // a large batch's acknowledgements with long reasons would pass the unread
                // bound, and the plugin would be stopped with its answers not all read.
                group.addTask { [input] in try await process.write(input, until: deadline) }
                while answers.count < batch.count { take(try await process.readLine(until: deadline)) }
                // Every record answered: what the plugin does with the rest of its input
                // (closing it, exiting) changes nothing.
                _ = await group.nextResult()
            }
            return (answers, nil)
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
            guard !answers.isEmpty else { throw error }
            return (answers, error)
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
        // A string of several words is not split (quoting rules would differ from a shell's),
        // and it is not shown: the command line may carry a secret. One word is the program.
        if case .scalar(let written, _)? = reader.node("command")?.value,
            (reader.string("command") ?? written).contains(where: \.isWhitespace)
        {
            reader.report(
                "expected a list, the program then each argument: [/path/to/program, --flag, value]", key: "command")
            return nil
        }
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
            reader.report(
                "names no program this machine can run: \(resolved[0]) (not found, or not executable)", key: "command")
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
            FileManager.default.isFile(atPath: path) && FileManager.default.isExecutableFile(atPath: path)
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

    public static func maxBatchSize(_ options: Options) -> Int? { options.maxBatchSize }

    public static func summary(_ options: Options) -> String {
        "runs \(options.command.first ?? ""), NDJSON over stdin/stdout"
    }
}
