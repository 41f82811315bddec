import Foundation
import GatewayCore
import GatewaySinks
import Testing

/// What a plugin says back is matched to the batch by record id.
@Suite struct ExecSinkAcknowledgementTests {
    /// An acknowledgement naming a record not in the batch counted towards it: the batch's
    /// last record was then sent again in every batch for as long as the plugin lived.
    @Test(.timeLimit(.minutes(1))) func anAcknowledgementForAnotherRecordIsIgnored() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("exec-acks-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let seen = folder.appendingPathComponent("seen.txt").path
        // Once, before its first real answer, it acknowledges an id it never got.
        let script = """
            import json, sys
            stray = True
            with open(\(String(reflecting: seen)), "a") as seen:
                for line in sys.stdin:
                    record_id = json.loads(line)["record_id"]
                    seen.write(record_id + "\\n"); seen.flush()
                    if stray:
                        print(json.dumps({"record_id": "not-in-this-batch", "status": "ok"}), flush=True)
                        stray = False
                    print(json.dumps({"record_id": record_id, "status": "ok"}), flush=True)
            """
        let sink = ExecSink(options: .init(command: ["python3", "-c", script], timeout: .seconds(20), maxBatchSize: 10))
        let batches = (0..<3).map { batch in
            (0..<3).map { index in
                AttributionRecord(provider: "iad", kind: .install, dedupeKey: "k\(batch)-\(index)", receivedAt: Date())
            }
        }
        for batch in batches {
            #expect(try await sink.deliver(batch) == Array(repeating: .delivered, count: 3))
        }
        await sink.shutdown()
        let received = try String(contentsOfFile: seen, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(received == batches.flatMap { $0.map(\.recordID) })
    }
}
