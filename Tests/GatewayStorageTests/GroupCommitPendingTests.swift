import Foundation
import GatewayCore
import GRDB
import Testing

import GatewayStorage

/// Pending AdServices tokens share commits too, and a token posted twice at once is
/// still one pending row.
@Suite struct GroupCommitPendingTests {
    @Test func concurrentTokensShareCommitsAndATokenTwiceIsOneRow() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pending-\(UUID().uuidString).sqlite").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = try SQLiteStore(path: path, durability: .normal)
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        // 200 submissions at once: 100 distinct tokens, each twice.
        let admissions = try await withThrowingTaskGroup(of: (Int, PendingAdmission).self) { group in
            for index in 0..<200 {
                group.addTask {
                    let work = PendingWork(
                        recordID: AttributionRecord.newRecordID(), provider: "adservices",
                        dedupeKey: "adservices:token-\(index % 100)", appID: "1", receivedAt: now, state: Data())
                    return (index, try await store.addPending(work, now: now))
                }
            }
            var all: [Int: PendingAdmission] = [:]
            for try await (index, admission) in group { all[index] = admission }
            return all
        }
        let accepted = admissions.values.filter { if case .accepted = $0 { true } else { false } }
        #expect(accepted.count == 100)
        #expect(try await store.pendingCounts()["adservices"] == 100)
        // Every duplicate names the pending row of its token.
        for index in 0..<100 {
            let ids = [admissions[index]!, admissions[index + 100]!].map { admission -> String in
                switch admission {
                case .accepted(let id): id
                case .duplicate(let id, _): id
                }
            }
            #expect(ids[0] == ids[1])
        }
    }
}
