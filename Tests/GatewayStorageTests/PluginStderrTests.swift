import Foundation
import GatewayCore
import GatewaySinks
import Logging
import Synchronization
import Testing

/// A plugin's stderr reaches the log as entries of its own, never as raw lines.
@Suite struct PluginStderrTests {
    @Test(.timeLimit(.minutes(1))) func eachLineIsAWarningOfItsOwnAndAFloodIsCut() async throws {
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
        await sink.shutdown()
        var lines: [String] = []
        for _ in 0..<200 {
            lines = captured.entries.withLock {
                $0.filter { $0.message == "plugin stderr" }.map { "\($0.metadata["line"] ?? "")" }
            }
            if captured.entries.withLock({ $0.contains { $0.message == "plugin stderr lines dropped" } }) { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(Array(lines.prefix(3)) == ["Traceback (most recent call last):", "  File x", "ValueError: boom"])
        #expect(lines.count == 100)
        let dropped = captured.entries.withLock { $0.first { $0.message == "plugin stderr lines dropped" } }
        #expect(dropped.map { "\($0.metadata["lines"] ?? "")" } == "403")
    }
}
