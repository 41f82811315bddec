import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import GatewayConfig
import GatewayCore
@testable import GatewayServer
import GRDB
import Hummingbird
import HummingbirdTesting
import Synchronization
import Testing

/// Reloads under steady load: a real server on loopback with its SQLite store, local
/// stand-ins for a webhook receiver and for Singular and AppsFlyer. Every accepted record
/// goes to exactly the sinks the configuration of the moment it was accepted named, a
/// reload refuses no request, and a sink's records wait across its removal. Waits are
/// bounds for work to finish, and each configuration serves a count of requests, not a
/// time: nothing here depends on the machine's speed.
@Suite struct LiveReloadTests {
    static let hookSecret = "whsec-reload-0123456789abcdef"

    /// Record ids each webhook path received.
    final class Hooks: Sendable {
        let seen = Mutex<[String: [String]]>([:])

        func router() -> Router<BasicRequestContext> {
            let router = Router()
            for path in ["a", "b"] {
                router.post(RouterPath("/\(path)")) { request, _ -> Response in
                    let body = try await request.body.collect(upTo: 10 << 20)
                    let object = try JSONSerialization.jsonObject(with: Data(body.readableBytesView))
                    let records = ((object as? [String: Any])?["records"] as? [[String: Any]]) ?? []
                    let ids = records.compactMap { $0["record_id"] as? String }
                    self.seen.withLock { $0[path, default: []] += ids }
                    return Response(status: .ok)
                }
            }
            return router
        }
    }

    /// One configuration: webhook sinks posting to `hooks`' paths, and `vendor`. The
    /// SQLite sink, written with each commit, changes its backoff with `changed`: its
    /// worker restarts and its inline delivery is set again at each reload; so does
    /// `skadnetwork` its quarantine's cap.
    static func yaml(
        _ env: TestEnvironment, hookPort: Int, vendorPort: Int, hooks: [String], vendor: String, changed: Bool = false
    ) -> String {
        var lines = [
            "server: { host: 127.0.0.1, port: 0, max_body_bytes: 65536, log_level: warning }",
            "storage: { sqlite: { path: \(env.databasePath), durability: normal } }",
            "providers:",
            "  iad: { enabled: true }",
            // Changed at each reload: the provider, its routes and its quarantine's
            // trimmer are made again under load.
            "  skadnetwork: { quarantine_max_mb: \(changed ? 20 : 10) }",
            "  s2s:",
            "    vendor: \(vendor)",
            "    vendors:",
        ]
        for (name, key) in [("singular", FakeVendors.singularKey), ("appsflyer", FakeVendors.appsFlyerKey)] {
            lines.append(
                "      \(name): { api_key: \(key), endpoint: \"http://127.0.0.1:\(vendorPort)\", "
                    + "backoff_initial_ms: 10, backoff_max_ms: 50, max_attempts: 1000 }")
        }
        lines += [
            "sinks:", "  local: { type: sqlite, backoff_initial_ms: 10, backoff_max_ms: \(changed ? 200 : 100) }",
        ]
        for hook in hooks {
            lines.append(
                "  hook_\(hook): { type: webhook, url: \"http://127.0.0.1:\(hookPort)/\(hook)\", "
                    + "secret: \(hookSecret), backoff_initial_ms: 10, backoff_max_ms: 100 }")
        }
        lines += ["routes:", "  - sinks: [local, \(hooks.map { "hook_\($0)" }.joined(separator: ", "))]"]
        return lines.joined(separator: "\n") + "\n"
    }

    /// What one request was and what came of it.
    struct Sent: Sendable {
        enum Kind: Sendable { case iad, event, postback }
        var kind: Kind
        /// The event's name, unique, by which a vendor's request is known.
        var name: String
        var status: Int
        var recordIDs: [String]
        /// The configurations it may have been accepted under: those of the reloads done
        /// when it started to those begun when it was answered.
        var generations: ClosedRange<Int>
    }

    /// The sinks configuration `generation` names for a record of `kind` (0 and every even
    /// one: webhook `a` and Singular; odd: webhook `b` and AppsFlyer). Postbacks posted
    /// with a made-up signature are quarantined, and no route here takes those.
    static func sinks(_ kind: Sent.Kind, generation: Int) -> Set<String> {
        let (hook, vendor) = generation % 2 == 0 ? ("hook_a", "s2s.singular") : ("hook_b", "s2s.appsflyer")
        switch kind {
        case .iad: return ["local", hook]
        case .event: return ["local", hook, vendor]
        case .postback: return []
        }
    }

    @Test func twentyReloadsUnderLoadLoseNothingAndRouteEachRecordByItsMoment() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let hooks = Hooks()
        let vendors = FakeVendors()
        let file = env.directory.appendingPathComponent("reload.yaml").path
        try await Application(router: hooks.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            .test(.live) { hookClient in
                let hookPort = try #require(hookClient.port)
                try await Application(
                    router: vendors.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0))
                ).test(.live) { vendorClient in
                    let vendorPort = try #require(vendorClient.port)
                    @Sendable func write(generation: Int) throws {
                        let even = generation % 2 == 0
                        try Self.yaml(
                            env, hookPort: hookPort, vendorPort: vendorPort, hooks: [even ? "a" : "b"],
                            vendor: even ? "singular" : "appsflyer", changed: !even
                        ).write(toFile: file, atomically: true, encoding: .utf8)
                    }
                    try write(generation: 0)
                    let load: @Sendable () throws -> GatewayConfiguration = {
                        try ConfigLoader.load(path: file, environment: [:], registry: .builtIn)
                    }
                    let gateway = try await Gateway.build(configuration: try load())
                    let reloader = ConfigReloader(gateway: gateway, removalSettle: .milliseconds(20), load: load)
                    try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
                        let port = try #require(client.port)
                        try await run(
                            port: port, gateway: gateway, reloader: reloader, write: write, env: env, hooks: hooks,
                            vendors: vendors, hookPort: hookPort, vendorPort: vendorPort, file: file)
                    }
                }
            }
    }

    func run(
        port: Int, gateway: Gateway, reloader: ConfigReloader, write: (Int) throws -> Void, env: TestEnvironment,
        hooks: Hooks, vendors: FakeVendors, hookPort: Int, vendorPort: Int, file: String
    ) async throws {
        let reloads = 20
        let state = LoadState()

        @Sendable func post(_ path: String, _ body: String) async throws -> (Int, Data) {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(body.utf8)
            let (data, response) = try await URLSession.shared.data(for: request)
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
        }
        @Sendable func recordIDs(_ data: Data) -> [String] {
            guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return [] }
            if let results = object["results"] as? [[String: Any]] {
                return results.compactMap { $0["record_id"] as? String }
            }
            return (object["record_id"] as? String).map { [$0] } ?? []
        }

        try await withThrowingTaskGroup(of: Void.self) { group in
            // Three clients, each posting to every ingest route in turn until told to stop.
            for client in 0..<3 {
                group.addTask {
                    var turn = client
                    while !state.stop.load(ordering: .relaxed) {
                        let n = state.counter.add(1, ordering: .relaxed).newValue
                        let name = "reload-\(n)"
                        let kind: Sent.Kind = [.iad, .event, .postback][turn % 3]
                        turn += 1
                        let from = state.done.load(ordering: .sequentiallyConsistent)
                        let (status, data): (Int, Data)
                        switch kind {
                        case .iad:
                            (status, data) = try await post("/v1/iad", IAdPayloads.attributed(user: name))
                        case .event:
                            (status, data) = try await post(
                                "/v1/events", S2SEndToEndTests.event("event", name: name, user: name))
                        case .postback:
                            let postback =
                                #"{"version":"4.0","ad-network-id":"n.skadnetwork","transaction-id":"\#(name)","#
                                + #""app-id":1234567890,"attribution-signature":"AAAA"}"#
                            (status, data) = try await post("/v1/skadnetwork/postbacks", postback)
                        }
                        let to = state.begun.load(ordering: .sequentiallyConsistent)
                        state.sent.withLock {
                            $0.append(
                                Sent(
                                    kind: kind, name: name, status: status, recordIDs: recordIDs(data),
                                    generations: from...max(from, to)))
                        }
                    }
                }
            }
            // And `/readyz`, which a load balancer watches, all along.
            group.addTask {
                while !state.stop.load(ordering: .relaxed) {
                    let (body, response) = try await URLSession.shared.data(
                        from: URL(string: "http://127.0.0.1:\(port)/readyz")!)
                    let status = (response as? HTTPURLResponse)?.statusCode ?? 0
                    state.readiness.withLock {
                        $0.append(status == 200 ? "200" : "\(status) \(String(decoding: body, as: UTF8.self))")
                    }
                }
            }
            // Each configuration serves at least thirty requests before the next reload.
            for generation in 1...reloads {
                let before = state.sent.withLock { $0.count }
                #expect(try await env.eventually(seconds: 120) { state.sent.withLock { $0.count } >= before + 30 })
                try write(generation)
                state.begun.add(1, ordering: .sequentiallyConsistent)
                await reloader.reload()
                state.done.add(1, ordering: .sequentiallyConsistent)
            }
            let before = state.sent.withLock { $0.count }
            #expect(try await env.eventually(seconds: 120) { state.sent.withLock { $0.count } >= before + 30 })
            state.stop.store(true, ordering: .relaxed)
            try await group.waitForAll()
        }
        #expect(try await gateway.metrics.configReloads(result: "applied", in: gateway) == reloads)

        let requests = state.sent.withLock { $0 }
        let refused = requests.filter { !(200..<300).contains($0.status) }
        let refusedCount = refused.count
        #expect(refusedCount == 0, "\(refused.prefix(5).map { "\($0.kind) \($0.status)" })")
        #expect(requests.allSatisfy { $0.recordIDs.count == 1 }, "every answer names its record")
        let readiness = state.readiness.withLock { $0 }
        let notReady = readiness.filter { $0 != "200" }.count
        #expect(!readiness.isEmpty && notReady == 0, "\(Set(readiness))")

        // Every sink named at once: records of a sink removed by a reload waited in its
        // outbox, and go now.
        try Self.yaml(
            env, hookPort: hookPort, vendorPort: vendorPort, hooks: ["a", "b"], vendor: "[singular, appsflyer]"
        )
        .write(toFile: file, atomically: true, encoding: .utf8)
        await reloader.reload()

        func delivered() throws -> [String: Set<String>] {
            var sinks: [String: Set<String>] = [:]
            for id in try env.deliveredRecordIDs() { sinks[id, default: []].insert("local") }
            for (path, ids) in hooks.seen.withLock({ $0 }) {
                for id in ids { sinks[id, default: []].insert("hook_\(path)") }
            }
            let byName = Dictionary(requests.map { ($0.name, $0.recordIDs.first ?? "") }) { first, _ in first }
            for seen in vendors.accepted {
                guard let name = seen.parameters.values.first(where: { byName[$0] != nil }), let id = byName[name]
                else { continue }
                sinks[id, default: []].insert("s2s.\(seen.vendor)")
            }
            return sinks
        }
        func settled(_ sinks: [String: Set<String>]) -> [Sent] {
            requests.filter { request in
                let got = sinks[request.recordIDs.first ?? ""] ?? []
                return !request.generations.contains { Self.sinks(request.kind, generation: $0) == got }
            }
        }
        #expect(try await env.eventually(seconds: 120) { settled(try delivered()).isEmpty })
        let wrong = settled(try delivered())
        let misrouted = wrong.count
        #expect(
            misrouted == 0,
            "\(wrong.prefix(5).map { "\($0.kind) \($0.generations): \(try! delivered()[$0.recordIDs.first ?? ""] ?? [])" })"
        )
        // Each side of the switches was used, and no vendor refused an event.
        #expect(!vendors.accepted("singular").isEmpty && !vendors.accepted("appsflyer").isEmpty)
        #expect(hooks.seen.withLock { !($0["a"] ?? []).isEmpty && !($0["b"] ?? []).isEmpty })
        #expect(vendors.refused.isEmpty, "\(vendors.refused.prefix(3))")
        #expect(gateway.workers.map(\.sinkName) == ["hook_a", "hook_b", "local", "s2s.appsflyer", "s2s.singular"])
        // Vendors count every copy: each event went to its vendor once.
        let names = vendors.accepted.compactMap { seen in seen.parameters.values.first { $0.hasPrefix("reload-") } }
        #expect(names.count == Set(names).count)
        // Requests met each configuration on both sides of every reload.
        #expect(Set(requests.flatMap { Array($0.generations) }).count == reloads + 1)
    }
}

extension LiveReloadTests {
    /// A file that removes a sink and is still changing after it was read is refused (a
    /// file cut short while saved in place reads as a removal); once it stays the same,
    /// the removal applies and the sink's worker stops.
    @Test func aRemovalFromAFileStillBeingWrittenIsRefused() async throws {
        let state = LoadState()
        let env = try TestEnvironment()
        defer { env.remove() }
        let file = env.directory.appendingPathComponent("reload.yaml").path
        let cut = env.yaml()
        let full = cut.replacingOccurrences(
            of: "routes:\n  - sinks: [local]",
            with:
                "  other: { type: webhook, url: \"http://127.0.0.1:9/in\", secret: \(Self.hookSecret), paused: true }\n"
                + "routes:\n  - sinks: [local, other]")
        #expect(full != cut)
        try full.write(toFile: file, atomically: true, encoding: .utf8)
        let load: @Sendable () throws -> GatewayConfiguration = {
            let configuration = try ConfigLoader.load(path: file, environment: [:], registry: .builtIn)
            // The writer goes on after the read: the rest of the file arrives.
            if !state.stop.load(ordering: .relaxed) {
                try full.write(toFile: file, atomically: true, encoding: .utf8)
            }
            return configuration
        }
        let gateway = try await Gateway.build(
            configuration: try ConfigLoader.load(
                path: file, environment: [:], registry: .builtIn))
        let reloader = ConfigReloader(gateway: gateway, removalSettle: .milliseconds(20), load: load)
        #expect(gateway.workers.map(\.sinkName) == ["local", "other"])

        try cut.write(toFile: file, atomically: true, encoding: .utf8)
        await reloader.reload()
        #expect(try await gateway.metrics.configReloads(result: "rejected", in: gateway) == 1)
        #expect(gateway.workers.map(\.sinkName) == ["local", "other"])
        #expect(gateway.pipeline.router.routes.flatMap(\.sinks).contains("other"))

        state.stop.store(true, ordering: .relaxed)
        try cut.write(toFile: file, atomically: true, encoding: .utf8)
        await reloader.reload()
        #expect(try await gateway.metrics.configReloads(result: "applied", in: gateway) == 1)
        #expect(gateway.workers.map(\.sinkName) == ["local"])
        #expect(!gateway.pipeline.router.routes.flatMap(\.sinks).contains("other"))
    }
}

extension LiveReloadTests {
    /// A sink that cannot be built from the reread file (its database cannot be opened)
    /// refuses the reload: nothing changes, and no new sink built before it is left
    /// expected at `/readyz`.
    @Test func aSinkThatCannotBeBuiltRefusesTheReload() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let file = env.directory.appendingPathComponent("reload.yaml").path
        try env.yaml().write(toFile: file, atomically: true, encoding: .utf8)
        let load: @Sendable () throws -> GatewayConfiguration = {
            try ConfigLoader.load(path: file, environment: [:], registry: .builtIn)
        }
        let gateway = try await Gateway.build(configuration: try load())
        let reloader = ConfigReloader(gateway: gateway, removalSettle: .milliseconds(20), load: load)
        let unopenable = env.directory.appendingPathComponent("a-file").path
        try "not a folder".write(toFile: unopenable, atomically: true, encoding: .utf8)
        try env.yaml().replacingOccurrences(
            of: "routes:\n  - sinks: [local]",
            with:
                "  fine: { type: webhook, url: \"http://127.0.0.1:9/in\", secret: \(Self.hookSecret), paused: true }\n"
                + "  broken: { type: sqlite, path: \(unopenable)/broken.sqlite }\n"
                + "routes:\n  - sinks: [local, fine, broken]"
        ).write(toFile: file, atomically: true, encoding: .utf8)
        await reloader.reload()
        #expect(try await gateway.metrics.configReloads(result: "rejected", in: gateway) == 1)
        #expect(gateway.workers.map(\.sinkName) == ["local"])
        #expect(gateway.pipeline.router.routes.map(\.sinks) == [["local"]])
        #expect(gateway.health.stoppedSinks == ["local"], "only the worker this test never ran")
    }
}

/// What the load's clients and the reloads share.
final class LoadState: Sendable {
    /// Reloads begun and done: a request between the two may meet either configuration.
    let begun = Atomic(0)
    let done = Atomic(0)
    let stop = Atomic(false)
    let sent = Mutex<[LiveReloadTests.Sent]>([])
    let counter = Atomic(0)
    /// What `/readyz` answered.
    let readiness = Mutex<[String]>([])
}

extension GatewayMetrics {
    /// `gateway_config_reloads_total{result}` as `/metrics` shows it.
    func configReloads(result: String, in gateway: Gateway) async throws -> Int? {
        var buffer: [UInt8] = []
        gateway.metricsRegistry.emit(into: &buffer)
        let prefix = "gateway_config_reloads_total{result=\"\(result)\"} "
        let text = String(decoding: buffer, as: UTF8.self)
        return text.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Int($0.dropFirst(prefix.count)) }
    }
}
