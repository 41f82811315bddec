import Foundation
import GatewayConfig
import GatewayCore
import Hummingbird
import HummingbirdTesting
import NIOCore
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

    /// A reload swaps the limits between requests; one it left as it was keeps its
    /// buckets, so that a reload hands nobody a fresh burst.
    @Test func aReloadKeepsTheBucketsOfALimitItLeftAlone() {
        var limits = RateLimits()
        limits.perIP = .init(rate: 1, burst: 2)
        let live = LiveRateLimits(limits)
        let perIP = live.limiters.perIP
        #expect(live.limiters.perKey == nil && perIP != nil)
        limits.perKey = .init(rate: 5, burst: 10)
        live.replace(with: limits)
        #expect(live.limiters.perIP === perIP)
        #expect(live.limiters.perKey?.rate == 5 && live.limiters.perKey?.burst == 10)
        limits.perIP = .init(rate: 1, burst: 3)
        limits.openRoutesPerIP = nil
        live.replace(with: limits)
        #expect(live.limiters.perIP !== perIP && live.limiters.perIP?.burst == 3)
        #expect(live.limiters.openRoutesPerIP == nil)
    }

    @Test func aClientOverItsLimitGets429WithRetryAfterAndOperatorRoutesStayOpen() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        var configuration = try env.configuration()
        // One token a thousand seconds: however slowly the machine sends the ten, none refills.
        configuration.server.rateLimits.perIP = .init(rate: 0.001, burst: 3)
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
            // The burst goes through, and nothing after it.
            #expect(statuses == [202, 202, 202] + Array(repeating: 429, count: 7))
            #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok)
            #expect(try await client.execute(uri: "/openapi.yaml", method: .get).status == .ok)
            // Counted, so that a limit set too low (a balancer left out of trusted_proxies) shows.
            let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            let refused = statuses.filter { $0 == 429 }.count
            #expect(metrics.contains(#"gateway_rate_limited_total{limit="per_ip"} \#(refused)"#), "\(metrics)")
            #expect(metrics.contains(#"gateway_rate_limited_total{limit="per_key"} 0"#))
            // Nothing refused was stored.
            #expect(try await gateway.store.countRecords(matching: .init()) == statuses.filter { $0 == 202 }.count)
        }
    }

    @Test func idleBucketsAreSweptOnlyOnceTheMapHasDoubled() {
        let limiter = RateLimiter(rate: 1, burst: 1, sweepAt: 4)
        let start = ContinuousClock.now
        for caller in 0..<4 { _ = limiter.wait(for: "c\(caller)", now: start) }
        // Nobody is idle yet: the sweep keeps all four and waits for eight.
        _ = limiter.wait(for: "c4", now: start)
        #expect(limiter.callers == 5)
        for caller in 5..<8 { _ = limiter.wait(for: "c\(caller)", now: start) }
        #expect(limiter.callers == 8)
        // Two seconds on every bucket is full again, and the next newcomer sweeps them.
        _ = limiter.wait(for: "late", now: start.advanced(by: .seconds(2)))
        #expect(limiter.callers == 1)
    }

    @Test func anIPv6CallerIsLimitedByItsSlash64() throws {
        func caller(_ ip: String) throws -> String {
            RateLimitMiddleware.ipCaller(ClientAddress.peer(try SocketAddress(ipAddress: ip, port: 1))!)
        }
        #expect(try caller("2001:db8:1:2::1") == caller("2001:db8:1:2:ffff:ffff:ffff:ffff"))
        #expect(try caller("2001:db8:1:2::1") != caller("2001:db8:1:3::1"))
        #expect(try caller("192.0.2.7") == "ip:192.0.2.7")
        // IPv4 through a dual-stack listener: its own address, not one bucket for all.
        #expect(try caller("::ffff:192.0.2.7") == "ip:192.0.2.7")
        #expect(try caller("::ffff:198.51.100.9") == "ip:198.51.100.9")
    }

    @Test func aKeyHasOneBucketHoweverItIsSpelledAndMadeUpKeysGetNone() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let key = "key-for-app-1234567890"
        let yaml =
            env.yaml() + """

                auth:
                  api_keys: [ { app_id: "1234567890", key: "\(key)", scope: backend } ]
                """
        var configuration = try ConfigLoader.parse(
            yaml: yaml, file: "limits.yaml", environment: [:], registry: .builtIn)
        configuration.server.rateLimits.perKey = .init(rate: 0.001, burst: 2)
        let gateway = try await Gateway.build(configuration: configuration)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            func post(_ authorization: String, _ index: Int) async throws -> Int {
                try await Self.postIAd(client, authorization: authorization, user: "spelled-\(index)")
            }
            var statuses: [Int] = []
            for (index, spelling) in ["Bearer \(key)", "bearer \(key)", "BEARER  \(key)", "Bearer \(key) "].enumerated()
            {
                statuses.append(try await post(spelling, index))
            }
            #expect(statuses == [202, 202, 429, 429])
        }
        // Keys that name nobody get no bucket (authentication refuses them; the per-IP
        // limit is theirs), so that they can neither fill the map nor start afresh.
        let keyring = APIKeyring(keys: configuration.auth.apiKeys)
        func caller(_ headers: HTTPFields) -> String? { RateLimitMiddleware.keyCaller(headers, keyring: keyring) }
        #expect(caller([.authorization: "Bearer made-up-key-0000000000"]) == nil)
        #expect(caller([.authorization: key]) == nil)
        #expect(caller([.authorization: "bearer  \(key) "]) != nil)
        // The ASA SDK's `apikey` header is the same caller as the bearer token.
        #expect(caller([APIKeyring.apiKeyHeader: key]) == caller([.authorization: "Bearer \(key)"]))
        #expect(caller([APIKeyring.apiKeyHeader: "made-up-key-0000000000"]) == nil)
    }

    /// A key inside an app is public, and its one bucket, spent by anyone, would get real
    /// installs refused. An app's key (`shipped_in_app: true`, or the default `scope: app`)
    /// has no bucket of its own; each client's per-IP limit still holds.
    @Test func aKeyShippedInAnAppIsLimitedPerClientNotAsOneBucket() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let shipped = "sdk-key-for-app-1234567890", backend = "backend-key-for-app-1234567890"
        let yaml =
            env.yaml() + """

                auth:
                  api_keys:
                    - { app_id: "1234567890", key: "\(shipped)", shipped_in_app: true }
                    - { app_id: "1234567890", key: "\(backend)", scope: backend }
                """
        var configuration = try ConfigLoader.parse(
            yaml: yaml, file: "limits.yaml", environment: [:], registry: .builtIn)
        #expect(configuration.auth.apiKeys.map(\.scope) == [.app, .backend])
        configuration.server.rateLimits.perKey = .init(rate: 0.001, burst: 2)
        let gateway = try await Gateway.build(configuration: configuration)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            func post(_ key: String, _ index: Int) async throws -> Int {
                try await Self.postIAd(client, authorization: "Bearer \(key)", user: "\(key)-\(index)")
            }
            var statuses: [Int] = []
            for index in 0..<4 { statuses.append(try await post(shipped, index)) }
            #expect(statuses == [202, 202, 202, 202])
            statuses = []
            for index in 0..<4 { statuses.append(try await post(backend, index)) }
            #expect(statuses == [202, 202, 429, 429])
        }
    }

    /// The status of an iAd post for `user` with `authorization`.
    static func postIAd(_ client: some TestClientProtocol, authorization: String, user: String) async throws -> Int {
        let body = ByteBuffer(string: IAdPayloads.attributed(user: user))
        return Int(
            try await client.execute(
                uri: "/v1/iad", method: .post, headers: [.authorization: authorization], body: body
            )
            .status.code)
    }

    @Test func limitsAreConfigured() throws {
        let config = try ConfigLoader.parse(
            yaml: "server: { rate_limits: { per_key: { per_second: 50 }, per_ip: { per_second: 5, burst: 20 } } }",
            file: "limits.yaml", environment: [:], registry: .builtIn)
        #expect(config.server.rateLimits.perKey == .init(rate: 50, burst: 100))
        #expect(config.server.rateLimits.perIP == .init(rate: 5, burst: 20))
        // The open routes' limit is on unless turned off.
        #expect(config.server.rateLimits.openRoutesPerIP == .init(rate: 100, burst: 1000))
        let off = try ConfigLoader.parse(
            yaml: "server: { rate_limits: { open_routes_per_ip: { per_second: 0 } } }",
            file: "off.yaml", environment: [:], registry: .builtIn)
        #expect(off.server.rateLimits.openRoutesPerIP == nil)
        #expect(throws: ConfigError.self) {
            try ConfigLoader.parse(
                yaml: "server: { rate_limits: { per_ip: { per_second: 0 } } }", file: "zero.yaml", environment: [:],
                registry: .builtIn)
        }
    }

    /// Apple's open postback routes take no key, and what does not verify on them is still
    /// kept: they have a per-IP bucket of their own, which no other route spends. A body
    /// that is not JSON is answered fast and kept nowhere.
    @Test(arguments: [true, false])
    func theOpenRoutesHaveABucketOfTheirOwnUnlessItIsTurnedOff(on: Bool) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let yaml = """
            server:
              host: 127.0.0.1
              port: 0
              log_level: warning
              rate_limits: { open_routes_per_ip: { per_second: \(on ? 1 : 0), burst: 3 } }
            storage: { sqlite: { path: \(env.databasePath), durability: normal } }
            providers: { iad: {}, skadnetwork: {} }
            sinks: { local: { type: sqlite } }
            """
        let configuration = try ConfigLoader.parse(yaml: yaml, file: "open.yaml", environment: [:], registry: .builtIn)
        let gateway = try await Gateway.build(configuration: configuration)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            // Thirty at once: to all pass at a token a second after a burst of three, they
            // would have to take half a minute to arrive.
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<30 {
                    let path =
                        index.isMultiple(of: 2)
                        ? "/.well-known/skadnetwork/report-attribution/"
                        : "/.well-known/appattribution/report-attribution"
                    group.addTask {
                        Int(
                            try await client.execute(uri: path, method: .post, body: ByteBuffer(string: "x")).status
                                .code)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let refused = statuses.count(where: { $0 == 429 })
            let passed = statuses.count(where: { $0 == 400 })
            #expect(refused + passed == statuses.count)
            if on {
                // The burst, on both routes together, then refusals.
                #expect(passed >= 3)
                #expect(refused > 0)
            } else {
                #expect(refused == 0)
            }
            // Routes with a key are not limited by it.
            for index in 0..<5 {
                let body = ByteBuffer(string: IAdPayloads.attributed(user: "open-\(index)"))
                #expect(try await client.execute(uri: "/v1/iad", method: .post, body: body).status.code == 202)
            }
            let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            #expect(metrics.contains(#"gateway_rate_limited_total{limit="open_routes_per_ip"} \#(refused)"#))
            #expect(metrics.contains(#"gateway_rate_limited_total{limit="per_ip"} 0"#))
        }
    }
}
