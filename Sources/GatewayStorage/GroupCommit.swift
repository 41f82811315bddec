import Foundation
import GRDB
import GatewayCore
import Synchronization

/// Runs the writes of concurrent requests in shared transactions: while one commit runs,
/// new writes queue, and the next commit takes them all. Each request still resumes only
/// after its write is committed, so a `2xx` keeps meaning "on disk"; what changes is
/// that many requests share one commit (and one fsync). Records of ingested payloads and
/// pending AdServices tokens both go through it.
actor GroupCommit {
    struct Job {
        /// Performs the write inside the shared transaction; may run again alone.
        let run: @Sendable (Database) throws -> Void
        let finish: @Sendable ((any Error)?) -> Void
    }

    private let pool: DatabasePool
    private var queue: [Job] = []
    private var writing = false
    /// How many commits so far, for tests.
    private(set) var commits = 0

    init(pool: DatabasePool) {
        self.pool = pool
    }

    /// Runs `write` in the next shared transaction and returns its result once committed.
    /// Writes in one transaction see each other's rows, in submission order.
    func submit<T: Sendable>(_ write: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let result = Mutex<T?>(nil)
        return try await withCheckedThrowingContinuation { continuation in
            queue.append(
                Job(
                    run: { db in
                        let value = try write(db)
                        result.withLock { $0 = value }
                    },
                    finish: { error in
                        if let error {
                            continuation.resume(throwing: error)
                        } else {
                            continuation.resume(returning: result.withLock { $0! })
                        }
                    }))
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
                try await pool.write { db in
                    for job in jobs { try job.run(db) }
                }
                for job in jobs { job.finish(nil) }
            } catch where jobs.count > 1 {
                // One job's failure rolled the shared transaction back; it must not fail
                // the others: each runs again on its own.
                for job in jobs {
                    do {
                        try await pool.write { db in try job.run(db) }
                        job.finish(nil)
                    } catch {
                        job.finish(error)
                    }
                }
            } catch {
                jobs.first?.finish(error)
            }
        }
        writing = false
    }
}
