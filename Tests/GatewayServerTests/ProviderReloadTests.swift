import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import GatewayCore
import Hummingbird
import HummingbirdTesting
import Logging
import Synchronization
import Testing

@testable import GatewayServer

/// Providers enabled, changed and disabled by a reload, on a real server on loopback with
/// its SQLite store and a local stand-in for Apple's AdServices endpoint: the next request
/// finds the routes, the resolver and the contributed routes of the configuration of the
/// moment.
@Suite struct ProviderReloadTests {
    /// `env`'s configuration with `providers` in place of its own.
    static func yaml(_ env: TestEnvironment, providers: String) -> String {
        env.yaml().replacingOccurrences(of: "providers:\n  iad: { enabled: true }\n", with: "providers:\n\(providers)")
    }

    static let s2s =
        #"  s2s: { vendor: singular, vendors: { singular: { api_key: k, endpoint: "http://127.0.0.1:9" } } }"#

    func status(_ client: TestClientProtocol, _ uri: String, _ body: String? = nil) async throws -> Int {
        let response = try await client.execute(
            uri: uri, method: body == nil ? .get : .post, body: body.map { ByteBuffer(string: $0) })
        return Int(response.status.code)
    }

    @Test func aProviderEnabledByAReloadServesItsRoutesAndOneDisabledAnswers404() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let model = env.directory.appendingPathComponent("conversion-model.yaml")
        try SKAdNetworkEndToEndTests.model.write(to: model, atomically: true, encoding: .utf8)
        let file = env.directory.appendingPathComponent("reload.yaml").path
        try Self.yaml(env, providers: "  iad: { enabled: true }\n").write(
            toFile: file, atomically: true, encoding: .utf8)
        let event = S2SEndToEndTests.event("event", name: "reloaded")
        let install = IAdPayloads.attributed(user: "reloaded")
        let conversionValue = "/v1/skadnetwork/conversion-value?n=session"
        try await withReloadingGateway(file: file) { client, gateway, reload in
            #expect(try await status(client, "/v1/events", event) == 404)
            #expect(try await status(client, conversionValue) == 404)

            try await reload(
                Self.yaml(
                    env,
                    providers:
                        "  iad: { enabled: true }\n  skadnetwork: { conversion_model: \(model.path) }\n\(Self.s2s)\n"
                ))
            #expect(try await status(client, "/v1/events", event) == 202)
            #expect(try await status(client, conversionValue) == 200)
            #expect(try await status(client, "/v1/iad", install) == 202)
            let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            #expect(metrics.contains(#"gateway_records_received_total{provider="s2s"} 1"#), "\(metrics)")

            try await reload(Self.yaml(env, providers: "\(Self.s2s)\n"))
            #expect(try await status(client, "/v1/iad", IAdPayloads.attributed(user: "after")) == 404)
            #expect(try await status(client, conversionValue) == 404)
            #expect(try await status(client, "/v1/events", S2SEndToEndTests.event("event", name: "after")) == 202)
            #expect(try await gateway.store.countRecords(matching: .init()) == 3)
        }
    }

    /// A file a setting names is compared by its contents: a conversion model edited in
    /// place, its name unchanged, is the model the next request is answered by.
    @Test func aConversionModelEditedInPlaceIsTheOneAReloadApplies() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let model = env.directory.appendingPathComponent("conversion-model.yaml")
        try SKAdNetworkEndToEndTests.model.write(to: model, atomically: true, encoding: .utf8)
        let yaml = Self.yaml(env, providers: "  skadnetwork: { conversion_model: \(model.path) }\n")
        let file = env.directory.appendingPathComponent("reload.yaml").path
        try yaml.write(toFile: file, atomically: true, encoding: .utf8)
        let now = Int(Date().timeIntervalSince1970)
        let ask =
            "/v1/skadnetwork/conversion-value?a=app&i=com.example.app&app_v=1.0&p=iOS&idfv=X"
            + "&last_call_to_skadnetwork_timestamp=\(now - 60)&n=trial_started&conversion_value=0"
        try await withReloadingGateway(file: file) { client, _, reload in
            func answer() async throws -> String {
                String(buffer: try await client.execute(uri: ask, method: .get).body)
            }
            #expect(try await answer() == #"{"conversion_value":1,"status":"ok"}"#)
            let edited = SKAdNetworkEndToEndTests.model
                .replacingOccurrences(of: "values: 0, events: [session]", with: "values: 0-4, events: [session]")
                .replacingOccurrences(
                    of: "values: 1-9, events: [trial_started]", with: "values: 5-9, events: [trial_started]")
            try edited.write(to: model, atomically: true, encoding: .utf8)
            try await reload(yaml)
            let after = try await answer()
            #expect(after == #"{"conversion_value":5,"status":"ok"}"#, "\(after)")
        }
    }

    /// `adservices`' resolver and the ASA SDK's routes come and go with the provider, and a
    /// changed endpoint is asked from the next token on.
    @Test func adServicesEnabledChangedAndDisabledByReloads() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let first = FakeAppleAdServices()
        let second = FakeAppleAdServices()
        let file = env.directory.appendingPathComponent("reload.yaml").path
        try Self.yaml(env, providers: "  iad: { enabled: true }\n").write(
            toFile: file, atomically: true, encoding: .utf8)
        // The longest answer wait and a long timeout: a loaded machine must not turn the
        // first call into a retry or the answer into a pending one.
        @Sendable func adservices(_ port: Int) -> String {
            """
              iad: { enabled: true }
              adservices:
                endpoint: http://127.0.0.1:\(port)/api/v1/
                answer_wait_ms: 30000
                timeout_ms: 30000
                sdk: { app_id: "1234567890" }

            """
        }
        @Sendable func resolve(_ client: TestClientProtocol, _ token: String) async throws -> (Int, [String: Any]) {
            let response = try await client.execute(
                uri: "/v1/adservices", method: .post, body: AdServicesEndToEndTests.body(token))
            let json = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
            return (Int(response.status.code), json ?? [:])
        }
        try await withFakes(first, second) { firstPort, secondPort in
            try await withReloadingGateway(file: file) { client, gateway, reload in
                let before = AdServicesEndToEndTests.token("before")
                #expect(try await resolve(client, before).0 == 404)
                #expect(try await status(client, "/functions/v1/create-user", "{}") == 404)

                try await reload(Self.yaml(env, providers: adservices(firstPort)))
                let token = AdServicesEndToEndTests.token("enabled")
                let (accepted, answer) = try await resolve(client, token)
                #expect(accepted == 202 && answer["resolved"] as? Bool == true, "\(answer)")
                #expect(first.calls(token) == 1)
                #expect(try await status(client, "/functions/v1/create-user", "{}") == 200)

                try await reload(Self.yaml(env, providers: adservices(secondPort)))
                let changed = AdServicesEndToEndTests.token("changed")
                let (again, answered) = try await resolve(client, changed)
                #expect(again == 202 && answered["resolved"] as? Bool == true, "\(answered)")
                #expect(second.calls(changed) == 1 && first.calls(changed) == 0)

                try await reload(Self.yaml(env, providers: "  iad: { enabled: true }\n"))
                #expect(try await resolve(client, AdServicesEndToEndTests.token("after")).0 == 404)
                #expect(try await status(client, "/functions/v1/create-user", "{}") == 404)
                #expect(gateway.resolvers.isEmpty)
            }
        }
    }

    /// A resolver a reload replaces lets go of the tokens it claimed and had not begun:
    /// the next one asks for them at once, not after the claim's two-minute lease.
    @Test func aReplacedResolverReleasesTheTokensItHadNotBegun() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let (first, second) = (FakeAppleAdServices(), FakeAppleAdServices())
        let tokens = (0...4).map { AdServicesEndToEndTests.token("claimed-\($0)") }
        // Apple holds its answers at the first endpoint: its resolver is busy with the
        // first token while the others arrive, then claims those four together and
        // begins one, held until after the reload.
        first.held.withLock { $0 = Set(tokens) }
        let options = "answer_wait_ms: 0, error_backoff_initial_ms: 10, error_backoff_max_ms: 200"
        try await withResolverSwap(env, first, second, options: options) { client, gateway, swap in
            for token in tokens {
                let response = try await client.execute(
                    uri: "/v1/adservices", method: .post, body: AdServicesEndToEndTests.body(token))
                #expect(response.status == .accepted)
                if token == tokens[0] { #expect(try await env.eventually { first.calls(token) == 1 }) }
            }
            _ = first.held.withLock { $0.remove(tokens[0]) }
            #expect(try await env.eventually { first.calls(tokens[1]) == 1 })
            try await swap()
            #expect(
                try await env.eventually(seconds: 60) {
                    try await gateway.store.pendingCounts()["adservices", default: 0] == 0
                })
            #expect(tokens[2...].allSatisfy { first.calls($0) == 0 && second.calls($0) >= 1 })
        }
    }

    /// A request waiting for its token's answer when a reload replaces the resolver gets
    /// the answer the new resolver finds, rather than waiting out `answer_wait_ms`.
    @Test func aRequestWaitingAcrossAReloadGetsTheNewResolversAnswer() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let (first, second) = (FakeAppleAdServices(), FakeAppleAdServices())
        let (busy, waiting) = (AdServicesEndToEndTests.token("busy"), AdServicesEndToEndTests.token("waiting"))
        first.held.withLock { $0 = [busy] }
        try await withResolverSwap(env, first, second, options: "answer_wait_ms: 30000") { client, gateway, swap in
            // A connection each: the test client's one connection would queue them.
            let port = try #require(client.port)
            @Sendable func post(_ token: String) async throws -> AdServicesEndToEndTests.Answer {
                var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/v1/adservices")!)
                request.httpMethod = "POST"
                request.httpBody = Data(AdServicesEndToEndTests.body(token).readableBytesView)
                request.timeoutInterval = 120
                let (data, _) = try await URLSession.shared.data(for: request)
                return try JSONDecoder().decode(AdServicesEndToEndTests.Answer.self, from: data)
            }
            // The resolver is busy with one token (Apple holds it) when the other arrives.
            let busyAnswer = Task { try await post(busy) }
            #expect(try await env.eventually { first.calls(busy) == 1 })
            let waitingAnswer = Task { try await post(waiting) }
            #expect(
                try await env.eventually { try await gateway.store.pendingCounts()["adservices", default: 0] == 2 })
            try await swap()
            let answer = try await waitingAnswer.value
            #expect(answer.resolved, "\(answer)")
            #expect(second.calls(waiting) == 1 && first.calls(waiting) == 0)
            _ = try await busyAnswer.value
        }
    }

    /// A gateway whose `adservices` asks `first` (one call at a time, `options` added),
    /// and a `swap` that reloads it to ask `second`, waits until the old resolver is
    /// stopping, then lets `first` answer what it holds.
    func withResolverSwap(
        _ env: TestEnvironment, _ first: FakeAppleAdServices, _ second: FakeAppleAdServices, options: String,
        _ body:
            @escaping @Sendable (TestClientProtocol, Gateway, _ swap: @escaping @Sendable () async throws -> Void)
            async throws -> Void
    ) async throws {
        @Sendable func adservices(_ port: Int) -> String {
            "  adservices: { endpoint: \"http://127.0.0.1:\(port)/api/v1/\", concurrency: 1, timeout_ms: 30000, "
                + "\(options) }\n"
        }
        let file = env.directory.appendingPathComponent("reload.yaml").path
        let lines = Mutex<[String]>([])
        let handler = JSONLogHandler(label: "gateway", level: .info) { line in lines.withLock { $0.append(line) } }
        try await withFakes(first, second) { firstPort, secondPort in
            try Self.yaml(env, providers: adservices(firstPort)).write(toFile: file, atomically: true, encoding: .utf8)
            try await withReloadingGateway(file: file, logger: Logger(label: "gateway") { _ in handler }) {
                client, gateway, reload in
                try await body(client, gateway) {
                    try await reload(Self.yaml(env, providers: adservices(secondPort)))
                    #expect(
                        try await env.eventually {
                            lines.withLock { $0.contains { $0.contains("waiting for attempts in flight") } }
                        })
                    first.held.withLock { $0 = [] }
                }
            }
        }
    }

    /// Two fake AdServices endpoints on loopback, by port.
    func withFakes(
        _ first: FakeAppleAdServices, _ second: FakeAppleAdServices,
        _ body: @escaping @Sendable (Int, Int) async throws -> Void
    ) async throws {
        try await Application(router: first.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            .test(.live) { one in
                try await Application(
                    router: second.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0))
                ).test(.live) { two in
                    try await body(try #require(one.port), try #require(two.port))
                }
            }
    }
}
