import Foundation
import GRDB
import GatewayCore

/// Writes the records of concurrent requests in shared transactions: while one commit
/// runs, new requests queue, and the next commit takes them all. Each request still
/// resumes only after its records are committed, so a `2xx` keeps meaning "on disk";
/// what changes is that many requests share one commit (and one fsync).
actor GroupCommit {
    struct Job {
        let batch: [RoutedRecord]
        let bodies: [String]
        let continuation: CheckedContinuation<[IngestResult], Error>
    }

    private let pool: DatabasePool
    private var queue: [Job] = []
    private var writing = false
    /// How many commits and jobs so far, for tests.
    private(set) var commits = 0

    init(pool: DatabasePool) {
        self.pool = pool
    }

    func submit(_ batch: [RoutedRecord], bodies: [String]) async throws -> [IngestResult] {
        try await withCheckedThrowingContinuation { continuation in
            queue.append(Job(batch: batch, bodies: bodies, continuation: continuation))
            if !writing {
                writing = true
                Task { await self.drain() }
            }
        }
    }

    private func drain() async {
        while !queue.isEmpty {
            let jobs = queue
            queue = []
            commits += 1
            do {
                let results = try await pool.write { db in
                    try jobs.map { try SQLiteStore.insert($0.batch, bodies: $0.bodies, db) }
                }
                for (job, result) in zip(jobs, results) { job.continuation.resume(returning: result) }
            } catch where jobs.count > 1 {
                // One job's failure must not fail the others: write each on its own.
                for job in jobs {
                    do {
                        let result = try await pool.write { db in try SQLiteStore.insert(job.batch, bodies: job.bodies, db) }
                        job.continuation.resume(returning: result)
                    } catch {
                        job.continuation.resume(throwing: error)
                    }
                }
            } catch {
                jobs.first?.continuation.resume(throwing: error)
            }
        }
        writing = false
    }
}
