import Foundation
import GatewayCore
import Hummingbird

extension GatewayHTTP {
    /// `/healthz` (the process answers), `/readyz` (the store is reachable and committing,
    /// and every sink worker runs), `/metrics` (Prometheus text) and `/openapi.yaml` (the contract).
    static func addOperatorRoutes(to router: Router<GatewayRequestContext>, gateway: Gateway) {
        let outbox = gateway.routeState.outbox
        // `HEAD` as well as `GET`: load balancers and uptime checks probed with it, and got 404.
        func get(
            _ path: RouterPath, _ handler: @escaping @Sendable (Request, GatewayRequestContext) async throws -> Response
        ) {
            router.getAndHead(path, use: handler)
        }
        get("/healthz") { _, _ in
            JSONResponse.make(status: .ok, ["status": "ok"])
        }

        get("/readyz") { _, context -> Response in
            var problems: [String] = []
            if gateway.shutdown.isDraining { problems.append("shutting down") }
            do {
                try await gateway.store.ping()
            } catch {
                context.logger.warning("store unreachable", metadata: ["error": "\(error)"])
                problems.append("store unreachable")
            }
            // Reads can work while every write fails (a full disk, a damaged file).
            if let problem = gateway.sqlite?.commitHealth.problem() { problems.append(problem) }
            for sink in gateway.health.stoppedSinks {
                problems.append("sink worker '\(sink)' is not running")
            }
            // A sink that stopped delivering (its receiver down for too long) makes the
            // gateway not ready, so that the alert fires before the outbox fills the disk.
            // Only configured sinks: rows left by a sink taken out of config.yaml have no
            // worker, and would keep every instance out of its load balancer for good
            // (they show in /metrics and in the log at start instead). Nor paused ones:
            // pausing is the operator's own maintenance switch, and every instance shares
            // the outbox, so it would take them all out at once.
            let bound = gateway.configuration.server.readyMaxOutboxAge
            if bound > 0, let stats = try? await outbox.stats() {
                let now = Date()
                for sink in gateway.configuration.sinks.filter({ !$0.delivery.paused }).map(\.name).sorted() {
                    if let oldest = stats[sink]?.oldest, now.timeIntervalSince(oldest) > Double(bound) {
                        problems.append("sink '\(sink)' has undelivered records older than \(bound) s")
                    }
                }
            }
            if problems.isEmpty {
                return JSONResponse.make(status: .ok, ["status": "ready"])
            }
            return JSONResponse.make(
                status: .serviceUnavailable, ReadinessProblems(status: "not_ready", problems: problems))
        }

        get("/openapi.yaml") { _, _ -> Response in
            Response(
                status: .ok, headers: [.contentType: "application/yaml"],
                body: .init(byteBuffer: ByteBuffer(string: OpenAPIDocument.yaml)))
        }

        get("/metrics") { _, _ -> Response in
            let now = Date()
            let stats = (try? await outbox.stats()) ?? [:]
            // Configured sinks, and any whose rows outlived its removal from config.yaml
            // (0 once they are gone, not their last depth).
            for sink in Set(gateway.configuration.sinks.map(\.name)).union(await outbox.seen) {
                gateway.metrics.outbox(
                    sink: sink, depth: stats[sink]?.depth ?? 0,
                    oldestAgeSeconds: stats[sink]?.oldest.map { now.timeIntervalSince($0) } ?? 0)
            }
            let pending = (try? await gateway.store.pendingCounts()) ?? [:]
            // Enabled providers, and any whose tokens outlived it being turned off (nothing
            // resolves them; Apple forgets a token after a day).
            for provider in Set(gateway.resolvers.keys).union(pending.keys) {
                gateway.metrics.pending(provider: provider, depth: pending[provider] ?? 0)
            }
            let text = gateway.metricsRegistry.emitToBuffer()
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: text)))
        }
    }
}

struct ReadinessProblems: Encodable {
    let status: String
    let problems: [String]
}
