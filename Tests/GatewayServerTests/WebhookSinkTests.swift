import Foundation
import GatewayCore
import GatewayStorage
import Hummingbird
import HummingbirdTesting
import Synchronization
import Testing

@testable import GatewaySinks

/// The webhook sink against a local receiver that checks what a real one would.
@Suite struct WebhookSinkTests {
    static let secret = "whsec-test-0123456789abcdef"

    /// What the fake receiver saw, and what it answers next.
    final class Receiver: Sendable {
        struct Seen: Sendable {
            let body: Data
            let signature: String?
            let idempotencyKey: String?
            let contentType: String?
            let custom: String?
        }
        let seen = Mutex<[Seen]>([])
        /// Status codes to answer, in order; 200 once exhausted.
        let script = Mutex<[(Int, String?)]>([])
        /// Bodies larger than this are answered `413` and not kept, as nginx does.
        let bodyLimit = Mutex<Int?>(nil)

        func router() -> Router<BasicRequestContext> {
            let router = Router()
            router.post("/hook") { request, _ -> Response in
                let body = try await request.body.collect(upTo: 10 << 20)
                if let limit = self.bodyLimit.withLock({ $0 }), body.readableBytes > limit {
                    return Response(status: .contentTooLarge)
                }
                self.seen.withLock {
                    $0.append(
                        Seen(
                            body: Data(body.readableBytesView),
                            signature: self.header(request, "x-gateway-signature"),
                            idempotencyKey: self.header(request, "idempotency-key"),
                            contentType: request.headers[.contentType],
                            custom: self.header(request, "x-team")))
                }
                let (status, retryAfter) = self.script.withLock { $0.isEmpty ? (200, nil) : $0.removeFirst() }
                var headers = HTTPFields()
                if let retryAfter { headers[.retryAfter] = retryAfter }
                return Response(status: .init(code: status), headers: headers)
            }
            return router
        }

        var requests: [Seen] { seen.withLock { $0 } }

        func header(_ request: Request, _ name: String) -> String? {
            request.headers.first { $0.name.canonicalName == name }?.value
        }
    }

    func records(_ count: Int) -> [AttributionRecord] {
        (0..<count).map { index in
            var record = AttributionRecord(
                provider: "iad", kind: .install, dedupeKey: "iad:1:webhook-\(index)-\(UUID())",
                receivedAt: Date(timeIntervalSince1970: 1_700_000_000), attributed: true)
            record.appUserID = "webhook-\(index)"
            record.keyword = "meditation app"
            return record
        }
    }

    /// The default timeout is a bound no local answer needs, not a speed: the receiver runs
    /// in this process beside hundreds of other tests on a shared machine.
    func sink(
        port: Int, timeout: Duration = .seconds(60), now: @escaping @Sendable () -> Date = { Date() }
    ) -> WebhookSink {
        WebhookSink(
            options: .init(
                url: "http://127.0.0.1:\(port)/hook", secret: Self.secret, headers: [("X-Team", "growth")],
                timeout: timeout, maxBatchSize: 50, circuitThreshold: 3, circuitCoolDown: .seconds(30)),
            now: now)
    }

    @Test func postsSignedBatchesWithAStableIdempotencyKey() async throws {
        let receiver = Receiver()
        receiver.script.withLock { $0 = [(503, nil)] }
        try await Application(router: receiver.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            .test(.live) { client in
                let webhook = sink(port: try #require(client.port))
                let batch = records(3)

                #expect(
                    try await webhook.deliver(batch)
                        == Array(repeating: .retry(reason: "webhook answered 503", after: .zero), count: 3))
                // Retried, the outbox may read the same records back in another order.
                #expect(try await webhook.deliver(batch.reversed()) == Array(repeating: .delivered, count: 3))

                let seen = receiver.requests
                #expect(seen.count == 2)
                let delivered = try #require(seen.last)
                #expect(delivered.contentType == "application/json")
                #expect(delivered.custom == "growth")
                // A retry of the same batch carries the same key, so the receiver can drop repeats.
                #expect(seen[0].idempotencyKey == delivered.idempotencyKey)
                #expect(delivered.idempotencyKey?.count == 32)
                // A late version of a record (its names came) is not a repeat of the batch.
                var late = batch
                late[0].campaignName = "Spring"
                #expect(WebhookSink.idempotencyKey(late) != WebhookSink.idempotencyKey(batch))

                let json = try #require(try JSONSerialization.jsonObject(with: delivered.body) as? [String: Any])
                let sent = try #require(json["records"] as? [[String: Any]])
                #expect(sent.map { $0["record_id"] as? String } == batch.reversed().map(\.recordID))
                #expect(sent.first?["keyword"] as? String == "meditation app")

                let header = try #require(delivered.signature)
                let now = Int(Date().timeIntervalSince1970)
                #expect(WebhookSignature.verify(header: header, body: delivered.body, secret: Self.secret, now: now))
                #expect(
                    !WebhookSignature.verify(
                        header: header, body: delivered.body, secret: "another-secret-value", now: now))
                #expect(
                    !WebhookSignature.verify(
                        header: header, body: delivered.body + Data(" ".utf8), secret: Self.secret, now: now))
                // A stale timestamp is refused even with a valid MAC.
                #expect(
                    !WebhookSignature.verify(header: header, body: delivered.body, secret: Self.secret, now: now + 3600)
                )
            }
    }

    /// With one secret, a receiver moving to a new one would refuse every batch in between.
    /// With `previous_secret`, each batch is signed with both.
    @Test func duringARotationABatchIsSignedWithBothSecrets() async throws {
        let receiver = Receiver()
        let old = "the-old-secret-0123456789"
        try await Application(router: receiver.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            .test(.live) { client in
                var options = WebhookSink.Options(
                    url: "http://127.0.0.1:\(try #require(client.port))/hook", secret: Self.secret)
                options.previousSecret = old
                #expect(try await WebhookSink(options: options).deliver(records(1)) == [.delivered])
                let delivered = try #require(receiver.requests.last)
                let header = try #require(delivered.signature)
                #expect(header.matches(of: /v1=/).count == 2, "\(header)")
                let now = Int(Date().timeIntervalSince1970)
                #expect(WebhookSignature.verify(header: header, body: delivered.body, secret: Self.secret, now: now))
                #expect(WebhookSignature.verify(header: header, body: delivered.body, secret: old, now: now))
                #expect(
                    !WebhookSignature.verify(
                        header: header, body: delivered.body, secret: "another-secret-value", now: now))
                #expect(!header.contains(old) && !header.contains(Self.secret))
            }
    }

    @Test func answersAreClassifiedForTheWorker() async throws {
        let receiver = Receiver()
        receiver.script.withLock { $0 = [(429, "7"), (400, nil), (404, nil), (500, nil)] }
        try await Application(router: receiver.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            .test(.live) { client in
                let webhook = sink(port: try #require(client.port))
                #expect(
                    try await webhook.deliver(records(1)) == [
                        .retry(reason: "webhook answered 429", after: .seconds(7))
                    ])
                #expect(try await webhook.deliver(records(1)) == [.reject(reason: "webhook answered 400")])
                #expect(try await webhook.deliver(records(1)) == [.reject(reason: "webhook answered 404")])
                #expect(try await webhook.deliver(records(1)) == [.retry(reason: "webhook answered 500", after: .zero)])
            }
    }

    /// A batch over the receiver's body limit is sent in halves until each fits, every
    /// record once; a record too large on its own is the only one refused.
    @Test func aBatchOverTheReceiversBodyLimitIsSentInParts() async throws {
        let receiver = Receiver()
        try await Application(router: receiver.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            .test(.live) { client in
                let webhook = sink(port: try #require(client.port))
                var batch = records(7)
                let one = try AttributionRecord.makeEncoder().encode([batch[0]]).count + 20
                receiver.bodyLimit.withLock { $0 = one * 2 + 100 }
                batch[4].keyword = String(repeating: "k", count: one * 3)
                let outcomes = try await webhook.deliver(batch)
                #expect(outcomes[4] == .reject(reason: "webhook answered 413"))
                #expect(outcomes.enumerated().allSatisfy { $0.offset == 4 || $0.element == .delivered })
                let sent = try receiver.requests.flatMap { seen in
                    let json = try #require(try JSONSerialization.jsonObject(with: seen.body) as? [String: Any])
                    return try #require(json["records"] as? [[String: Any]]).compactMap { $0["record_id"] as? String }
                }
                #expect(sent.sorted() == batch.enumerated().filter { $0.offset != 4 }.map(\.element.recordID).sorted())
            }
    }

    /// A receiver that answers `200` with `Content-Length: 10`, then sends no body until
    /// `released` (the test's end, so that the server can stop).
    final class Release: Sendable {
        private let done = Mutex(false)
        func now() { done.withLock { $0 = true } }
        var happened: Bool { done.withLock { $0 } }
    }

    static func stallingRouter(released: Release) -> Router<BasicRequestContext> {
        let router = Router()
        let stall = { @Sendable (_: Request, _: BasicRequestContext) async throws -> Response in
            Response(
                status: .ok, headers: [.contentLength: "10", .contentType: "application/json"],
                body: ResponseBody { _ in
                    while !released.happened { try await Task.sleep(for: .milliseconds(50)) }
                })
        }
        router.post("/hook", use: stall)
        router.post("/engage", use: stall)
        return router
    }

    /// Whether `work` finished within a bound far past any timeout here: a failure, not a hang.
    static func finishes<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) async throws -> T? {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await work() }
            group.addTask {
                try await Task.sleep(for: .seconds(60))
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
    }

    @Test func anAnswerWhoseBodyStallsIsGivenUpWithinTheTimeout() async throws {
        let released = Release()
        defer { released.now() }
        try await Application(
            router: Self.stallingRouter(released: released),
            configuration: .init(address: .hostname("127.0.0.1", port: 0))
        )
        .test(.live) { client in
            defer { released.now() }
            let port = try #require(client.port)
            // The webhook's answer is its status: the 200 stands, the stalled body is dropped.
            // Time enough for the head on a loaded machine, CI beside a build; the body
            // never comes, whatever the timeout.
            let webhook = sink(port: port, timeout: .seconds(10))
            let delivered = try await Self.finishes { try await webhook.deliver(self.records(1)) }
            #expect(delivered == [.delivered], "\(String(describing: delivered))")
            // Mixpanel's verdict is in its body: without it, the worker retries.
            let mixpanel = MixpanelSink(
                options: .init(token: "mp-token", endpoint: "http://127.0.0.1:\(port)", timeout: .seconds(10)))
            let profile = { () -> AttributionRecord in
                var record = self.records(1)[0]
                record.appID = "1234567890"
                return record
            }()
            let failure = try await Self.finishes { () async -> String? in
                do {
                    _ = try await mixpanel.deliver([profile])
                    return nil
                } catch {
                    return "\(error)"
                }
            }
            #expect(
                failure??.contains("the answer's body did not arrive in time") == true, "\(String(describing: failure))"
            )
        }
    }

    @Test func aRedirectIsRetriedAndNeverFollowedToAnotherHost() async throws {
        let trap = RedirectTrap(statuses: [302, 307, 308])
        try await trap.run(paths: ["/hook"]) { destination, elsewhere throws in
            let webhook = WebhookSink(
                options: .init(
                    url: destination + "/hook", secret: Self.secret, headers: [("X-Team", "growth")],
                    circuitThreshold: 10))
            // 307 and 308 would send the signed body again, 302 at least its signature and
            // headers; and a 2xx from elsewhere would count as delivered.
            for status in [302, 307, 308] {
                let reason = "webhook answered \(status) (a redirect to \(elsewhere), not followed)"
                #expect(
                    try await webhook.deliver(records(2)) == [
                        .retry(reason: reason, after: .zero), .retry(reason: reason, after: .zero),
                    ])
            }
        }
        #expect(trap.redirects == 3)
        #expect(trap.calls.map(\.method) == [])
        #expect(trap.calls.compactMap { $0.headers["x-gateway-signature"] } == [])
    }

    @Test func aDeadEndpointOpensTheCircuitInsteadOfBeingHammered() async throws {
        // Nothing listens on port 9 (discard) on a test machine: every connection is refused.
        let clock = Mutex(Date(timeIntervalSince1970: 1_700_000_000))
        let webhook = sink(port: 9, timeout: .seconds(1), now: { clock.withLock { $0 } })
        for _ in 0..<3 {
            await #expect(throws: (any Error).self) { try await webhook.deliver(records(1)) }
        }
        // Open: the sink answers at once, with the time left, that it did not try.
        let outcome = try await webhook.deliver(records(1))
        #expect(outcome == [.postponed(reason: "circuit open after repeated failures", after: .seconds(30))])
        // After the cool-down one call goes through again (and fails, still down).
        clock.withLock { $0 = $0.addingTimeInterval(31) }
        await #expect(throws: (any Error).self) { try await webhook.deliver(records(1)) }
    }

    @Test func recordsHeldDuringAnOutageAllArriveOnceWhenTheReceiverIsBack() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let store = try SQLiteStore(path: env.databasePath, durability: .normal)
        let receiver = Receiver()
        // Down for a while: three answers of 503 before it recovers.
        receiver.script.withLock { $0 = [(503, nil), (503, nil), (503, nil)] }
        try await Application(router: receiver.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            .test(.live) { client in
                let clock = Mutex(Date())
                let webhook = sink(port: try #require(client.port), now: { clock.withLock { $0 } })
                let worker = SinkWorker(
                    sinkName: "hook", sink: webhook, store: store,
                    settings: DeliverySettings(batchSize: 10, maxAttempts: 10, backoffInitial: .seconds(1)),
                    now: { clock.withLock { $0 } }, random: { 0.5 })
                let batch = records(25)
                _ = try await store.ingest(batch.map { RoutedRecord(record: $0, sinks: ["hook"]) })

                // Drive the worker through the outage, moving the clock past each backoff.
                for _ in 0..<50 {
                    if try await worker.drainOnce() == 0 {
                        guard let next = try await store.nextDueDate(sink: "hook") else { break }
                        clock.withLock { $0 = max($0, next) }
                    }
                }
                #expect(try await store.outboxStats()["hook"] == nil)
                #expect(try await store.deadLetters(sink: "hook", limit: 10).isEmpty)

                var arrived: [String: Int] = [:]
                var keys: Set<String> = []
                for request in receiver.requests.dropFirst(3) {
                    let json = try #require(try JSONSerialization.jsonObject(with: request.body) as? [String: Any])
                    for record in json["records"] as? [[String: Any]] ?? [] {
                        arrived[record["record_id"] as? String ?? "", default: 0] += 1
                    }
                    #expect(keys.insert(request.idempotencyKey ?? "").inserted)
                }
                #expect(Set(arrived.keys) == Set(batch.map(\.recordID)))
                #expect(arrived.values.allSatisfy { $0 == 1 })
                #expect(
                    receiver.requests.dropFirst(3).allSatisfy { request in
                        (try? JSONSerialization.jsonObject(with: request.body) as? [String: Any])?["records"]
                            .map { ($0 as? [Any])?.count ?? 0 <= 10 } ?? false
                    })
            }
    }
}
