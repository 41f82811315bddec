import Foundation
import Testing

/// A `202` means the record is on disk: killing the process with SIGKILL after the answer
/// and restarting it delivers every acknowledged record to the SQLite sink exactly once.
@Suite struct CrashRecoveryTests {
    @Test func everyAcknowledgedRecordIsDeliveredExactlyOnceAfterSIGKILL() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        var acknowledged: Set<String> = []

        func launch(paused: Bool) async throws -> GatewayProcess {
            let log = env.directory.appendingPathComponent("\(UUID().uuidString).log")
            let gateway = try GatewayProcess(config: try env.writeConfig(paused: paused), logURL: log)
            try await gateway.start()
            return gateway
        }

        func postBatch(_ gateway: GatewayProcess, users: Range<Int>) async throws {
            for user in users {
                let (status, json) = try await gateway.post(
                    "/v1/iad", body: IAdPayloads.attributed(user: "crash-user-\(user)"))
                #expect(status == 202)
                if status == 202, let id = json["record_id"] as? String { acknowledged.insert(id) }
            }
        }

        // 1. The sink is paused: records are acknowledged and wait in the outbox when the process dies.
        let paused = try await launch(paused: true)
        try await postBatch(paused, users: 0..<25)
        paused.kill(SIGKILL)
        #expect(try env.deliveredRecordIDs().isEmpty)

        // 2. Delivering: killed straight after the last 202, with some records in flight or not yet offered.
        let delivering = try await launch(paused: false)
        try await postBatch(delivering, users: 25..<50)
        delivering.kill(SIGKILL)

        // 3. Restarted: every acknowledged record arrives, none twice.
        let restarted = try await launch(paused: false)
        let complete = try await env.eventually { Set(try env.deliveredRecordIDs()) == acknowledged }
        // A re-post of an acknowledged payload is a duplicate, not a new record.
        let (status, json) = try await restarted.post("/v1/iad", body: IAdPayloads.attributed(user: "crash-user-3"))
        #expect(try await restarted.stop(SIGTERM))

        #expect(acknowledged.count == 50)
        #expect(complete)
        let delivered = try env.deliveredRecordIDs()
        #expect(delivered.count == acknowledged.count)
        #expect(Set(delivered) == acknowledged)
        #expect(status == 200)
        #expect(json["status"] as? String == "duplicate")
        #expect(restarted.process.terminationStatus == 0)
    }
}
