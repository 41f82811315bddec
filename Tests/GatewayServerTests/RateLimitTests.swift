import Foundation
import GatewayConfig
import GatewayCore
import Hummingbird
import HummingbirdTesting
import Testing

@testable import GatewayServer

/// Per-key and per-IP limits: a caller over its rate gets `429` and `Retry-After`.
@Suite struct RateLimitTests {
    @Test func aBucketAllowsItsBurstThenItsRateAndSaysHowLongToWait() {
        let limiter = RateLimiter(rate: 2, burst: 3)
        let start = ContinuousClock.now
        #expect((0..<3).allSatisfy { _ in limiter.wait(for: "a", now: start) == nil })
        #expect(limiter.wait(for: "a", now: start) == .milliseconds(500))
        // Another caller has its own bucket.
        #expect(limiter.wait(for: "b", now: start) == nil)
        // Half a second later one more request is allowed, and no burst builds past 3.
        #expect(limiter.wait(for: "a", now: start.advanced(by: .milliseconds(500))) == nil)
        #expect(limiter.wait(for: "a", now: start.advanced(by: .milliseconds(500))) != nil)
        let later = start.advanced(by: .seconds(60))
        #expect((0..<3).allSatisfy { _ in limiter.wait(for: "a", now: later) == nil })
        #expect(limiter.wait(for: "a", now: later) != nil)
    }

    @Test func aClientOverItsLimitGets429WithRetryAfterAndOperatorRoutesStayOpen() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        var configuration = try env.configuration()
        configuration.server.rateLimits.perIP = .init(rate: 1, burst: 3)
        let gateway = try await Gateway.build(configuration: configuration)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            var statuses: [Int] = []
            for index in 0..<10 {
                let body = ByteBuffer(string: IAdPayloads.attributed(user: "limited-\(index)"))
                let response = try await client.execute(uri: "/v1/iad", method: .post, body: body)
                statuses.append(Int(response.status.code))
                if response.status.code == 429 {
                    #expect(Int(response.headers[.retryAfter] ?? "") ?? 0 >= 1)
                    #expect(String(buffer: response.body).contains(#""code":"rate_limited""#))
                }
            }
            // The burst goes through; ten requests in less than seven seconds cannot all.
            #expect(statuses.prefix(3) == [202, 202, 202])
            #expect(statuses.contains(429))
            #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok)
            // Nothing refused was stored.
            #expect(try await gateway.store.countRecords(matching: .init()) == statuses.filter { $0 == 202 }.count)
        }
    }

    @Test func limitsAreConfigured() throws {
        let config = try ConfigLoader.parse(
            yaml: "server: { rate_limits: { per_key: { per_second: 50 }, per_ip: { per_second: 5, burst: 20 } } }",
            file: "limits.yaml", environment: [:], registry: .builtIn)
        #expect(config.server.rateLimits.perKey == .init(rate: 50, burst: 100))
        #expect(config.server.rateLimits.perIP == .init(rate: 5, burst: 20))
    }
}
