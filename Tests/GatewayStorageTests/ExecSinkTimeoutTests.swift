import Foundation
import GatewayCore
import GatewaySinks
import Testing

/// A plugin that neither answers nor exits must cost a batch its timeout, not the worker.
@Suite struct ExecSinkTimeoutTests {
    // The shell's child keeps the plugin's stdout open after the shell is killed, so the
    // read can only end with that child, five minutes on: past the time limit. (Its stderr
    // goes nowhere, or the test run would wait for it too.)
    @Test(.timeLimit(.minutes(2))) func aPluginThatHangsWithItsStdoutHeldOpenTimesOutTheBatch() async throws {
        let sleep = "sleep 300.\(Int.random(in: 100_000...999_999))"
        let sink = ExecSink(
            options: .init(
                command: ["sh", "-c", "exec 2>/dev/null; \(sleep); true"], timeout: .milliseconds(300), maxBatchSize: 10
            ))
        let record = AttributionRecord(provider: "iad", kind: .install, dedupeKey: "k", receivedAt: Date())
        await #expect(throws: (any Error).self) { try await sink.deliver([record]) }
        // The next batch starts a fresh plugin, and times out the same way rather than
        // waiting behind the first.
        await #expect(throws: (any Error).self) { try await sink.deliver([record]) }
        // And the plugin's child went with it, not left holding a thread and a pipe.
        #expect(try await eventually { Self.processes(running: sleep) == 0 })
    }

    /// A plugin that stops reading its stdin: a batch past the pipe's 64 KB would block the
    /// write for as long as the plugin lived, holding a thread (a few such sinks could freeze
    /// the whole gateway) and shutdown with it.
    @Test(.timeLimit(.minutes(2))) func aPluginThatStopsReadingTimesOutTheBatchAtItsWrite() async throws {
        let sleep = "sleep 300.\(Int.random(in: 100_000...999_999))"
        let sink = ExecSink(
            options: .init(
                command: ["sh", "-c", "exec 2>/dev/null; exec \(sleep)"], timeout: .milliseconds(300), maxBatchSize: 500
            ))
        let records = (0..<500).map { index in
            var record = AttributionRecord(provider: "iad", kind: .install, dedupeKey: "k\(index)", receivedAt: Date())
            record.raw = .object(["padding": .string(String(repeating: "x", count: 400))])
            return record
        }
        // The reader's timeout, noticed first, must not hide why: the operator is told the
        // plugin does not read its input.
        let error = await #expect(throws: (any Error).self) { try await sink.deliver(records) }
        #expect("\(error.map { "\($0)" } ?? "")".contains("not reading its input"), "\(String(describing: error))")
        #expect(try await eventually { Self.processes(running: sleep) == 0 })
    }

    /// A plugin that answers and goes on running, with a child of its own, ends with the
    /// gateway: in a group of its own the terminal's Ctrl-C does not reach it, and left
    /// running it went on beside the copy the next start began.
    @Test(.timeLimit(.minutes(2))) func aRunningPluginAndItsChildEndWhenTheGatewayStops() async throws {
        let sleep = "sleep 120.\(Int.random(in: 100_000...999_999))"
        // Acknowledges each record (its id is the line's record_id), with a child beside it.
        let script = """
            import json, subprocess, sys
            subprocess.Popen(["sh", "-c", "exec \(sleep)"], stderr=subprocess.DEVNULL)
            for line in sys.stdin:
                print(json.dumps({"record_id": json.loads(line)["record_id"], "status": "ok"}), flush=True)
            """
        let sink = ExecSink(
            options: .init(command: ["python3", "-c", script], timeout: .seconds(20), maxBatchSize: 10))
        let record = AttributionRecord(provider: "iad", kind: .install, dedupeKey: "k", receivedAt: Date())
        #expect(try await sink.deliver([record]) == [.delivered])
        #expect(try await eventually { Self.processes(running: sleep) > 0 })
        #expect(Self.processes(running: sleep) == 1)
        await sink.shutdown()
        #expect(try await eventually { Self.processes(running: sleep) == 0 })
    }

    /// How many live processes have `command` as their command line.
    static func processes(running command: String) -> Int {
        let ids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return ids.filter { id in
            guard let line = FileManager.default.contents(atPath: "/proc/\(id)/cmdline") else { return false }
            return String(decoding: line, as: UTF8.self).replacingOccurrences(of: "\0", with: " ")
                .trimmingCharacters(in: .whitespaces) == command
        }.count
    }
}
