import Foundation
import GatewayCore
import Testing

/// A token that cannot be resolved (Apple down, refusing the gateway) is seen in the log
/// with its reason, once a minute however many attempts fail.
@Suite struct PendingResolverLogTests {
    /// A provider whose every attempt fails with the same reason.
    struct Unreachable: DeferredAttributionProvider {
        let name = "adservices"
        let routes: [ProviderRoute] = []
        let resolveConcurrency = 4
        let answerWait: Duration = .zero
        func normalize(_ payload: IngestPayload) throws -> [AttributionRecord] { [] }
        func accept(_ payload: IngestPayload) throws -> PendingWork {
            throw GatewayError.invalid("token", "not used in this test")
        }
        func resolve(_ work: PendingWork) async -> ResolutionStep {
            .retry(after: .seconds(0), error: "Apple answered 503", state: work.state)
        }
        func waitingRecord(_ work: PendingWork) -> AttributionRecord? { nil }
    }

    @Test func failedAttemptsAreLoggedWithTheirReasonOnceAMinute() async throws {
        let store = InMemoryStore()
        let log = CapturedLog()
        let resolver = PendingResolver(
            provider: Unreachable(), pipeline: IngestPipeline(store: store, router: RecordRouter(routes: [])),
            logger: log.logger)
        for index in 0..<3 {
            let work = PendingWork(
                provider: "adservices", dedupeKey: "adservices:token:\(index)", appID: "1", receivedAt: Date(),
                state: Data())
            _ = try await store.addPending(work, now: Date())
        }
        #expect(try await resolver.drainOnce() == 3)
        #expect(try await resolver.drainOnce() == 3)
        let failures = log.entries.withLock { $0 }.filter { $0.message == "an attempt failed and will be retried" }
        #expect(failures.count == 1)
        #expect(failures.first?.metadata["error"] == "Apple answered 503")
        #expect(try await store.pendingCounts() == ["adservices": 3])
    }
}
