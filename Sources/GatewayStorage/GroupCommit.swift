import Dispatch
import Foundation
import GRDB
import GatewayCore
import Synchronization

/// Runs the writes of concurrent requests in shared transactions: while one commit runs,
/// new writes queue, and the next commit takes them all. Each request still resumes only
/// after its write is committed, so a `2xx` keeps meaning "on disk"; what changes is
/// that many requests share one commit (and one fsync). Records of ingested payloads and
/// pending AdServices tokens both go through it.
///
/// The queue is a lock, not an actor, and the commits run on one dispatch queue with
/// GRDB's synchronous write: a request costs no executor hop to join a batch, and a
/// batch costs one hop in and one resume per request out (hops between Swift's executors,
/// NIO and GRDB's queues are a large share of a request's CPU).
final class GroupCommit: Sendable {
    struct Job {
        /// Performs the write inside the shared transaction; may run again alone.
        let run: @Sendable (Database) throws -> Void
        let finish: @Sendable ((any Error)?) -> Void
    }

    private struct State {
        var queue: [Job] = []
        var draining = false
    }

    private let pool: DatabasePool
    private let state = Mutex(State())
    /// Every commit's outcome, for readiness.
    let health = CommitHealth()
    private let committer = DispatchQueue(label: "attribution-gateway.group-commit")

    /// The file the pool opened, checked after each commit.
    private let file: StoreFileIdentity?

    init(pool: DatabasePool) {
        self.pool = pool
        file = StoreFileIdentity(path: pool.path)
    }

    /// Runs `write` in the next shared transaction and returns its result once committed.
    /// Writes in one transaction see each other's rows, in submission order.
    func submit<T: Sendable>(_ write: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let result = Mutex<T?>(nil)
        return try await withCheckedThrowingContinuation { continuation in
            let job = Job(
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
                })
            let startDrain = state.withLock { state in
                state.queue.append(job)
                defer { state.draining = true }
                return !state.draining
            }
            if startDrain {
                committer.async { self.drain() }
            }
        }
    }

    private func drain() {
        while true {
            let jobs = state.withLock { state in
                defer { state.queue = [] }
                if state.queue.isEmpty { state.draining = false }
                return state.queue
            }
            if jobs.isEmpty { return }
            do {
                try commit(jobs)
                for job in jobs { job.finish(nil) }
            } catch  where jobs.count > 1 && !CommitHealth.isStorageFault(error) {
                // One job's failure rolled the shared transaction back; it must not fail
                // the others: each runs again on its own, until the store itself fails.
                var fault: (any Error)?
                for job in jobs {
                    if let fault {
                        job.finish(fault)
                        continue
                    }
                    do {
                        try commit([job])
                        job.finish(nil)
                    } catch {
                        health.failed(error)
                        job.finish(error)
                        if CommitHealth.isStorageFault(error) { fault = error }
                    }
                }
            } catch {
                // The store's fault (busy past its timeout, full, failing), not a job's: every
                // job fails at once. Run again one by one, each would wait out the whole busy
                // timeout in turn, and the last would answer only after all of theirs.
                health.failed(error)
                for job in jobs { job.finish(error) }
            }
        }
    }

    /// Throws unless the store's path still names the file the pool opened, and tells
    /// readiness: for a write made outside the shared commits that a caller is told of.
    func checkFile() throws {
        do {
            try file?.check()
        } catch {
            health.failed(error)
            throw error
        }
    }

    /// Runs `jobs` in one transaction. Only a commit that wrote shows the store writable:
    /// one of duplicates alone writes nothing, and goes through on a full disk too.
    private func commit(_ jobs: [Job]) throws {
        let changed = try pool.write { db -> Bool in
            let before = db.totalChangesCount
            for job in jobs { try job.run(db) }
            return db.totalChangesCount > before
        }
        // Committed, but to a file no path names any more: not acknowledged (a stat, a
        // microsecond, per commit of many requests).
        try file?.check()
        if changed { health.succeeded() }
    }
}
