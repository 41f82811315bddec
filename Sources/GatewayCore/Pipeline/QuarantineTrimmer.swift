import Logging
import ServiceLifecycle

/// Keeps each provider's quarantined records (postbacks that did not verify, which anyone
/// may post to Apple's open routes) within the provider's cap, dropping the oldest first.
///
/// It trims when woken by a stored quarantined record, at most once per `pause`: a flood
/// of forged postbacks costs one trim a second, not one per request, and overshoots the
/// cap by at most what arrives in that second. It also trims at start (a cap lowered
/// since the last run) and hourly, so that what other replicas stored is trimmed too; and
/// every ten seconds while records a sink has yet to take hold the quarantine over its cap,
/// since once delivered they may go.
public final class QuarantineTrimmer: Service, Sendable {
    let store: any RecordStore
    /// The most bytes each provider's quarantined records may take, by provider name.
    public let caps: [String: Int]
    let metrics: GatewayMetrics
    let logger: Logger
    let pause: Duration
    private let wakeUp = WakeUp()

    public init(
        store: any RecordStore, caps: [String: Int], metrics: GatewayMetrics, logger: Logger,
        pause: Duration = .seconds(1)
    ) {
        self.store = store
        self.caps = caps
        self.metrics = metrics
        self.logger = logger
        self.pause = pause
    }

    /// Quarantined records were stored: trim soon.
    public func stored() {
        wakeUp.signal()
    }

    public func run() async throws {
        let warnings = OncePerInterval(.seconds(60))
        await withGracefulShutdownHandler {
            while !Task.isCancelled && !Task.isShuttingDownGracefully {
                let over = await trim(warnings: warnings)
                try? await cancelWhenGracefulShutdown { [pause] in try await Task.sleep(for: pause) }
                await wakeUp.wait(timeout: over ? .seconds(10) : .seconds(3600))
            }
        } onGracefulShutdown: {
            self.wakeUp.signal()
        }
    }

    /// One pass over every provider's quarantine; whether one is still over its cap (or
    /// could not be trimmed).
    @discardableResult
    public func trim(warnings: OncePerInterval = OncePerInterval(.zero)) async -> Bool {
        var over = false
        for (provider, cap) in caps.sorted(by: { $0.key < $1.key }) {
            do {
                let trim = try await store.trimQuarantined(provider: provider, maxBytes: cap)
                metrics.quarantineDropped(provider: provider, count: trim.dropped)
                over = over || trim.keptBytes > cap
                // Records a sink has yet to take are kept whatever the cap says.
                if trim.keptBytes > cap, warnings.allow() {
                    logger.warning(
                        "quarantined postbacks waiting for a sink keep the quarantine over its cap",
                        metadata: ["provider": "\(provider)", "bytes": "\(trim.keptBytes)", "cap_bytes": "\(cap)"])
                }
            } catch {
                over = true
                if warnings.allow() {
                    logger.warning(
                        "could not trim quarantined postbacks; retrying when more arrive",
                        metadata: ["provider": "\(provider)", "error": "\(error)"])
                }
            }
        }
        return over
    }
}
