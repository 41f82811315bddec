import Foundation
import GatewayCore
import GRDB
import Testing

import GatewayStorage

/// Pending AdServices tokens share commits too, and a token posted twice at once is
/// still one pending row.
@Suite struct GroupCommitPendingTests {
    @Test func concurrentTokensShareCommitsAndATokenTwiceIsOneRow() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pending-\(UUID().uuidString).sqlite")
            .path
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

    /// After a crash the one server of the store hands back what the dead one had claimed,
    /// due at once rather than after the lease; a retry's own schedule stays as it was.
    @Test func releasingClaimsMakesClaimedWorkDueAndLeavesScheduledRetriesAlone() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pending-\(UUID().uuidString).sqlite")
            .path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = try SQLiteStore(path: path, durability: .normal)
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        for token in ["claimed", "retrying"] {
            _ = try await store.addPending(
                PendingWork(
                    provider: "adservices", dedupeKey: "adservices:\(token)", appID: "1", receivedAt: now, state: Data()
                ),
                now: now)
        }
        let claimed = try await store.claimPending(provider: "adservices", now: now, lease: .seconds(120), limit: 10)
        #expect(claimed.count == 2)
        // One was answered "not found yet" and is due in an hour; the other's process died.
        let retrying = try #require(claimed.first { $0.dedupeKey == "adservices:retrying" })
        _ = try await store.settlePending([
            .retry(
                recordID: retrying.recordID, state: Data(), attempts: 1, at: now.addingTimeInterval(3600), error: "404")
        ])
        #expect(try await store.claimPending(provider: "adservices", now: now, lease: .seconds(120), limit: 10).isEmpty)

        #expect(try await store.releaseClaims(now: now) == 1)
        let again = try await store.claimPending(provider: "adservices", now: now, lease: .seconds(120), limit: 10)
        #expect(again.map(\.dedupeKey) == ["adservices:claimed"])
    }

    /// A key for one app cannot reach another app's work through a token both send.
    @Test func aTokenSentForTwoAppsIsEachAppsOwnWork() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pending-\(UUID().uuidString).sqlite")
            .path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = try SQLiteStore(path: path, durability: .normal)
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        func submit(_ app: String) async throws -> PendingAdmission {
            try await store.addPending(
                PendingWork(
                    provider: "adservices", dedupeKey: "adservices:same-token", appID: app, receivedAt: now,
                    state: Data()),
                now: now)
        }
        // Another app's key posts the token first…
        guard case .accepted(let other) = try await submit("999") else { throw Unexpected() }
        // …and the app it belongs to still gets work, and a record, of its own.
        guard case .accepted(let own) = try await submit("1234567890") else { throw Unexpected() }
        #expect(own != other)
        // Each app's repeats are duplicates of its own work only.
        #expect(try await submit("1234567890") == .duplicate(of: own, resolved: false))
        #expect(try await submit("999") == .duplicate(of: other, resolved: false))
        #expect(try await store.pendingCounts()["adservices"] == 2)

        // Once the other app's work is a record, the same holds.
        let claimed = try await store.claimPending(provider: "adservices", now: now, lease: .seconds(60), limit: 10)
        let settlements = claimed.map { work in
            var record = AttributionRecord(
                provider: "adservices", kind: .install, dedupeKey: work.dedupeKey, receivedAt: now,
                recordID: work.recordID)
            record.appID = work.appID
            return PendingSettlement.finished(
                recordID: work.recordID, records: [RoutedRecord(record: record, sinks: [])])
        }
        _ = try await store.settlePending(settlements)
        #expect(try await submit("1234567890") == .duplicate(of: own, resolved: true))
        #expect(try await submit("999") == .duplicate(of: other, resolved: true))
        #expect(try await store.pendingCounts()["adservices"] ?? 0 == 0)
    }

    struct Unexpected: Error {}
}
