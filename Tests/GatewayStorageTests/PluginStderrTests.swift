import Foundation
import GatewayCore
@testable import GatewaySinks
import Logging
import Synchronization
import Testing

/// A plugin's stderr reaches the log as entries of its own, never as raw lines.
@Suite struct PluginStderrTests {
    @Test(.timeLimit(.minutes(3))) func eachLineIsAWarningOfItsOwnAndAFloodIsCut() async throws {
        let captured = CapturedLog()
        let logger = captured.logger
        // A traceback, then a flood, then the answer.
        let script = """
            import json, sys
            sys.stderr.write("Traceback (most recent call last):\\n  File x\\nValueError: boom\\n")
            for n in range(500): sys.stderr.write("noise %d\\n" % n)
            sys.stderr.flush()
            for line in sys.stdin:
                print(json.dumps({"record_id": json.loads(line)["record_id"], "status": "ok"}), flush=True)
            """
        let sink = ExecSink(options: .init(command: ["python3", "-c", script], timeout: .seconds(20)), logger: logger)
        let record = AttributionRecord(provider: "iad", kind: .install, dedupeKey: "k", receivedAt: Date())
        #expect(try await sink.deliver([record]) == [.delivered])
        func lines() -> [String] {
            captured.entries.withLock {
                $0.filter { $0.message == "plugin stderr" }.map { "\($0.metadata["line"] ?? "")" }
            }
        }
        // Read before the stop, whose second of grace a loaded machine could miss.
        #expect(try await eventually { lines().count >= 100 })
        await sink.shutdown()
        // Told at the stop, and by the reader if it ends after it with lines still unread.
        func dropped() -> Int {
            captured.entries.withLock {
                $0.filter { $0.message == "plugin stderr lines dropped" }
                    .compactMap { Int("\($0.metadata["lines"] ?? "")") }.reduce(0, +)
            }
        }
        _ = try await eventually { dropped() >= 403 }
        #expect(Array(lines().prefix(3)) == ["Traceback (most recent call last):", "  File x", "ValueError: boom"])
        #expect(lines().count == 100)
        #expect(dropped() == 403)
    }

    /// The limit is the sink's, not each plugin process's, which would let a plugin crashing
    /// in a loop log 100 lines per restart.
    @Test(.timeLimit(.minutes(1))) func theLimitIsTheSinksHoweverOftenItsPluginRestarts() async throws {
        let captured = CapturedLog()
        let script = """
            import sys
            for n in range(60): sys.stderr.write("dying %d\\n" % n)
            sys.stderr.flush()
            sys.exit(1)
            """
        let sink = ExecSink(
            options: .init(command: ["python3", "-c", script], timeout: .seconds(20)), logger: captured.logger)
        for index in 0..<6 {
            let record = AttributionRecord(provider: "iad", kind: .install, dedupeKey: "k\(index)", receivedAt: Date())
            _ = try? await sink.deliver([record])
        }
        await sink.shutdown()
        // Each process's last lines are read within its readers' grace, two seconds at most.
        func logged() -> Int { captured.entries.withLock { $0.filter { $0.message == "plugin stderr" }.count } }
        for _ in 0..<60 where logged() < 100 { try await Task.sleep(for: .milliseconds(50)) }
        try await Task.sleep(for: .seconds(3))
        #expect(logged() == 100, "\(logged()) lines from 360")
        // The count of the rest is told at the sink's stop (and by a reader ending after
        // it), not once per restart.
        let counts = captured.entries.withLock { $0.filter { $0.message == "plugin stderr lines dropped" }.count }
        #expect((1...2).contains(counts), "\(counts) count lines")
    }

    /// The count of lines a minute dropped is told when the minute ends, not only with the
    /// next line after it or at the sink's stop: the reader asks once a second whether the
    /// minute is over.
    @Test func aMinutesDropsAreToldWhenItEndsWithoutAnotherLine() {
        let captured = CapturedLog()
        var limiter = PluginStderr.LineLimiter(logger: captured.logger)
        for _ in 0..<(PluginStderr.linesPerMinute + 7) { limiter.emit(Data("noise".utf8)) }
        limiter.rollOver()
        func dropped() -> [String] {
            captured.entries.withLock {
                $0.filter { $0.message == "plugin stderr lines dropped" }.map { "\($0.metadata["lines"] ?? "")" }
            }
        }
        #expect(dropped().isEmpty, "the minute is not over")
        limiter.windowStart = .now - .seconds(61)
        limiter.rollOver()
        #expect(dropped() == ["7"])
        #expect(limiter.logged == 0)
    }
}
