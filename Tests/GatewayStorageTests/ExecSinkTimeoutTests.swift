import Foundation
import GatewayCore
import GatewaySinks
import Testing

/// A plugin that neither answers nor exits must cost a batch its timeout, not the worker.
@Suite struct ExecSinkTimeoutTests {
    // The shell's child keeps the plugin's stdout open after the shell is killed, so the
    // read can only end with that child, two minutes on: past the time limit. (Its stderr
    // goes nowhere, or the test run would wait for it too.)
    @Test(.timeLimit(.minutes(1))) func aPluginThatHangsWithItsStdoutHeldOpenTimesOutTheBatch() async throws {
        let sink = ExecSink(
            options: .init(command: ["sh", "-c", "exec 2>/dev/null; sleep 120; true"], timeout: .milliseconds(300), maxBatchSize: 10))
        let record = AttributionRecord(provider: "iad", kind: .install, dedupeKey: "k", receivedAt: Date())
        await #expect(throws: (any Error).self) { try await sink.deliver([record]) }
        // The next batch starts a fresh plugin, and times out the same way rather than
        // waiting behind the first.
        await #expect(throws: (any Error).self) { try await sink.deliver([record]) }
    }
}
