import GatewayCore
import Synchronization
import Testing

@testable import GatewayServer

/// Reports are built one at a time, a few more wait, and the rest are refused `429`.
@Suite struct ReportGateTests {
    final class Order: Sendable {
        let list = Mutex<[Int]>([])
    }

    @Test(.timeLimit(.minutes(1)))
    func oneBuildRunsAFewWaitAndTheRestAreRefused() async throws {
        let gate = ReportGate(maxWaiting: 2)
        let (release, releaser) = AsyncStream<Void>.makeStream()
        let order = Order()
        let first = Task {
            try await gate.run {
                order.list.withLock { $0.append(0) }
                for await _ in release { break }
                return 0
            }
        }
        while order.list.withLock({ $0 }).isEmpty { await Task.yield() }
        let queued = (1...2).map { index in
            Task {
                try await gate.run {
                    order.list.withLock { $0.append(index) }; return index
                }
            }
        }
        // Both queued behind the first: neither has run.
        while await gate.waitingCount < 2 { await Task.yield() }
        #expect(order.list.withLock { $0 } == [0])
        await #expect(throws: GatewayError.self) { try await gate.run { 3 } }

        releaser.yield()
        #expect(try await first.value == 0)
        for task in queued { _ = try await task.value }
        #expect(order.list.withLock { $0 } == [0, 1, 2])
        // Free again: the next one runs at once.
        #expect(try await gate.run { 4 } == 4)
    }
}
