import GatewayCore
import GatewayPostgres
import Synchronization
import Testing

/// `answered`, the bound on every wait for PostgreSQL: a request's `503`, a readiness
/// probe's failure and a background step's retry all depend on it ending at its limit.
@Suite struct AnsweredTests {
    static let url = try! PostgresURL("postgres://gateway@127.0.0.1:1/gateway")

    /// Work that goes on until the test lets it, whatever its task's cancellation says: a
    /// statement already sent, waiting for the server's reply.
    final class Stuck: Sendable {
        private let state = Mutex<(released: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

        var released: Bool { state.withLock { $0.released } }

        func wait() async {
            await withCheckedContinuation { continuation in
                let go = state.withLock { state in
                    if state.released { return true }
                    state.waiter = continuation
                    return false
                }
                if go { continuation.resume() }
            }
        }

        func release() {
            let waiter = state.withLock { state in
                state.released = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }

    @Test func workThatIgnoresCancellationIsAnsweredAtTheLimit() async throws {
        let stuck = Stuck()
        // Lets a broken `answered` end, so that the test fails rather than hangs.
        let fallback = Task {
            try await Task.sleep(for: .seconds(60))
            stuck.release()
        }
        defer { fallback.cancel() }
        await #expect(throws: StoreNotReady.self) {
            try await answered(within: .milliseconds(100), from: Self.url) {
                await stuck.wait()
                return 1
            }
        }
        #expect(!stuck.released, "the answer waited for the work to end")
        stuck.release()
    }

    @Test func theWorksAnswerAndErrorPassThrough() async throws {
        struct Refused: Error {}
        let value = try await answered(within: .seconds(600), from: Self.url) { 42 }
        #expect(value == 42)
        await #expect(throws: Refused.self) {
            try await answered(within: .seconds(600), from: Self.url) { () async throws -> Int in throw Refused() }
        }
    }
}
