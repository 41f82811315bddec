import Dispatch
import Foundation
import GatewayCore
import GRDB
import Synchronization
import Testing

@testable import GatewayStorage

/// Concurrent ingests share commits and still each get exactly their own results.
@Suite struct GroupCommitTests {
    func record(_ key: String) -> RoutedRecord {
        RoutedRecord(
            record: AttributionRecord(
                provider: "iad", kind: .install, dedupeKey: key, receivedAt: Date(timeIntervalSince1970: 1_700_000_000)),
            sinks: ["local"])
    }

    @Test func concurrentRequestsAreStoredOnceEachWithTheirOwnAnswers() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("group-\(UUID().uuidString).sqlite")
            .path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = try SQLiteStore(path: path, durability: .normal)
        // 300 requests at once: 200 distinct keys, and 100 that repeat one of them.
        let requests = (0..<300).map { index in [record("key-\(index % 200)")] }
        let results = try await withThrowingTaskGroup(of: (Int, [IngestResult]).self) { group in
            for (index, request) in requests.enumerated() {
                group.addTask { (index, try await store.ingest(request)) }
            }
            var all: [Int: [IngestResult]] = [:]
            for try await (index, result) in group { all[index] = result }
            return all
        }
        #expect(results.count == 300)
        let stored = results.values.compactMap { result -> String? in
            if case .stored(let id) = result.first { return id }
            return nil
        }
        #expect(stored.count == 200)
        // Every duplicate names the record that was stored under its key.
        for (index, result) in results {
            let key = "key-\(index % 200)"
            let original = try await store.existingRecordIDs(dedupeKeys: [key])[.init(key)]
            switch result.first {
            case .stored(let id)?: #expect(id == original)
            case .duplicate(let id)?: #expect(id == original)
            case nil: Issue.record("no result for request \(index)")
            }
        }
        #expect(try await store.outboxStats()["local"]?.depth == 200)
    }
}

/// A shared commit the store itself refused (full, busy past its timeout) fails every
/// request in it at once: run again one by one, each waited out the store's fault in turn.
@Suite struct GroupCommitFaultTests {
    @Test func aStoreFaultFailsTheWholeBatchWithoutRunningEachAgain() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fault-\(UUID().uuidString).sqlite")
            .path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let store = try SQLiteStore(path: path, durability: .normal)
        // A full disk, for the writer: no page past those it has.
        try await store.pool.write { db in
            try db.execute(sql: "CREATE TABLE scratch (x BLOB)")
            let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            try db.execute(sql: "PRAGMA max_page_count = \(pages)")
        }
        // A first job holds the committer while the others queue behind it, as one batch.
        let started = Mutex(false)
        let release = DispatchSemaphore(value: 0)
        let holder = Task {
            try await store.groupCommit.submit { _ in
                started.withLock { $0 = true }
                release.wait()
            }
        }
        while !started.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
        final class Runs: Sendable { let count = Mutex([Int](repeating: 0, count: 5)) }
        let runs = Runs()
        let batch = Task {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<5 {
                    group.addTask {
                        do {
                            try await store.groupCommit.submit { db in
                                runs.count.withLock { $0[index] += 1 }
                                try db.execute(sql: "INSERT INTO scratch VALUES (zeroblob(100000))")
                            }
                            return false
                        } catch {
                            return true
                        }
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        release.signal()
        try await holder.value
        #expect(try await batch.value == 5)
        // No write ran twice (the first of the batch did, alone, before the fix).
        #expect(runs.count.withLock { $0 }.allSatisfy { $0 <= 1 }, "\(runs.count.withLock { $0 })")
    }
}

/// When readiness calls the store unwritable, and when it lets it try again.
@Suite struct CommitHealthTests {
    static func full() -> DatabaseError { DatabaseError(resultCode: .SQLITE_FULL, message: "database or disk is full") }

    @Test func aRefusedRowIsNotAStoreFault() {
        let health = CommitHealth()
        for _ in 0..<5 {
            health.failed(DatabaseError(resultCode: .SQLITE_CONSTRAINT, message: "refused by a trigger"))
        }
        #expect(health.problem() == nil)
    }

    @Test func threeFailuresInARowWithinTheWindowAreAProblemAndASuccessEndsIt() {
        let health = CommitHealth()
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        health.failed(Self.full(), at: start)
        health.failed(Self.full(), at: start)
        #expect(health.problem(now: start) == nil)
        health.failed(Self.full(), at: start)
        #expect(health.problem(now: start)?.contains("3 failed in a row") == true)
        // Out of its load balancer, the instance gets nothing to commit: let back in to try.
        #expect(health.problem(now: start.addingTimeInterval(31)) == nil)
        health.failed(Self.full(), at: start.addingTimeInterval(40))
        #expect(health.problem(now: start.addingTimeInterval(40)) != nil, "the next failure counts on")
        health.succeeded()
        #expect(health.problem(now: start.addingTimeInterval(40)) == nil)
    }

    @Test func aDamagedFileIsNotLetBackInByTimeOnlyByACommit() {
        let health = CommitHealth()
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        let corrupt = DatabaseError(resultCode: .SQLITE_CORRUPT, message: "database disk image is malformed")
        for _ in 0..<3 { health.failed(corrupt, at: start) }
        let problem = health.problem(now: start.addingTimeInterval(3600))
        #expect(problem?.contains("damaged") == true && problem?.contains("restore it from a backup") == true)
        // Damaged it stays, whatever fails next, until a commit writes.
        health.failed(Self.full(), at: start)
        #expect(health.problem(now: start.addingTimeInterval(3600))?.contains("damaged") == true)
        health.succeeded()
        #expect(health.problem(now: start.addingTimeInterval(3600)) == nil)
    }

    @Test func oneDamageCodeAmongOtherFaultsIsLetBackInByTime() {
        let health = CommitHealth()
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        health.failed(Self.full(), at: start)
        health.failed(Self.full(), at: start)
        health.failed(DatabaseError(resultCode: .SQLITE_NOTADB, message: "file is not a database"), at: start)
        #expect(health.problem(now: start)?.contains("cannot commit") == true)
        #expect(health.problem(now: start.addingTimeInterval(31)) == nil)
    }
}

/// A store file deleted or replaced while the server runs: commits still go into the file
/// the server holds open, which no path names, and vanished at the next start.
@Suite struct StoreFileGoneTests {
    @Test func aCommitAfterTheStorePathStoppedNamingItsFileIsNotAcknowledged() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("gone-\(UUID().uuidString).sqlite")
            .path
        let moved = path + ".moved"
        defer {
            for file in [path, moved] {
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: file + suffix) }
            }
        }
        let store = try SQLiteStore(path: path, durability: .normal)
        let tests = GroupCommitTests()
        _ = try await store.ingest([tests.record("before")])
        #expect(store.commitHealth.problem() == nil)

        try FileManager.default.moveItem(atPath: path, toPath: moved)
        // The ASA SDK's writes too: a user id handed out for a store about to vanish was
        // unknown after the restart, and its installs and purchases with it.
        await #expect(throws: StoreFileIdentity.Gone.self) { _ = try await store.createSDKUser(now: Date()) }
        #expect(store.commitHealth.problem()?.contains("deleted or replaced") == true)
        await #expect(throws: StoreFileIdentity.Gone.self) { _ = try await store.ingest([tests.record("while-moved")]) }
        // Not ready at once, whatever the count of failures, and not let back in by time.
        let problem = try #require(store.commitHealth.problem(now: Date().addingTimeInterval(3600)))
        #expect(problem.contains("deleted or replaced") && problem.contains(path), "\(problem)")
        // A file of that name again, a new one: still not the store.
        _ = FileManager.default.createFile(atPath: path, contents: Data())
        await #expect(throws: StoreFileIdentity.Gone.self) { _ = try await store.ingest([tests.record("replaced")]) }
        try FileManager.default.removeItem(atPath: path)

        // Put back: commits are acknowledged again.
        try FileManager.default.moveItem(atPath: moved, toPath: path)
        _ = try await store.ingest([tests.record("after")])
        #expect(store.commitHealth.problem() == nil)
    }
}
