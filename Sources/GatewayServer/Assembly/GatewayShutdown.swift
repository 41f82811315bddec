import GatewayConfig
import GatewayCore
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals

/// Whether the gateway is on its way out: `/readyz` answers `503` from the first signal,
/// while the rest keeps serving through `server.shutdown_delay_s`.
public final class ShutdownState: Sendable {
    private let draining = Atomic(false)

    public init() {}

    public var isDraining: Bool { draining.load(ordering: .relaxed) }

    func begin() { draining.store(true, ordering: .relaxed) }
}

extension GatewayHTTP {
    /// Runs the gateway until a signal, then stops it in the order a load balancer needs:
    /// `/readyz` fails at once; after `shutdown_delay_s` the listener closes, requests in
    /// flight finish and each sink worker finishes its batch; after `shutdown_timeout_s`
    /// what is still running is cancelled. A second signal cancels at once. Cancelling
    /// loses nothing: a request not yet answered was not acknowledged, and a batch cut
    /// short stays in the outbox, to be offered again by the next start.
    ///
    /// With `reload`, each `SIGHUP` reloads the configuration it returns (see
    /// ``ConfigReloader``), and so does each change of the file when `watchConfig` is set.
    public static func run(
        gateway: Gateway, signals: [UnixSignal] = [.sigterm, .sigint],
        watchConfig: Bool = false, logLevel: LiveLogLevel? = nil,
        reload: (@Sendable () throws -> GatewayConfiguration)? = nil
    ) async throws {
        let settings = gateway.configuration.server
        let logger = gateway.logger
        var configuration = ServiceGroupConfiguration(
            services: [makeApplication(gateway: gateway)], logger: logger)
        configuration.maximumGracefulShutdownDuration = .seconds(settings.shutdownTimeoutSeconds)
        // No bound on cancellation: service-lifecycle ends an overrun with `fatalError`, a
        // crash, and the one wait that ignores cancellation is a commit in progress
        // (SQLite's busy wait is at most 10 s). The orchestrator's SIGKILL is the bound.
        configuration.maximumCancellationDuration = nil
        let group = ServiceGroup(configuration: configuration)

        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            tasks.addTask {
                var delay: Task<Void, Never>?
                defer { delay?.cancel() }
                for await signal in await UnixSignalsSequence(trapping: signals) {
                    if delay == nil {
                        gateway.shutdown.begin()
                        logger.info(
                            "shutting down",
                            metadata: [
                                "signal": "\(signal)", "delay_s": "\(settings.shutdownDelaySeconds)",
                                "timeout_s": "\(settings.shutdownTimeoutSeconds)",
                            ])
                        // Cancelled only once the group has ended, when triggering does nothing.
                        delay = Task {
                            try? await Task.sleep(for: .seconds(settings.shutdownDelaySeconds))
                            await group.triggerGracefulShutdown()
                        }
                    } else {
                        logger.warning(
                            "second signal: stopping now; batches in flight stay in the outbox",
                            metadata: ["signal": "\(signal)"])
                        // Closes the listener first, as the delay would have.
                        await group.triggerGracefulShutdown()
                        return
                    }
                }
            }
            if let reload {
                let reloader = ConfigReloader(gateway: gateway, logLevel: logLevel, load: reload)
                // Never end by themselves: the group or the second signal ends them.
                tasks.addTask { await reloadOnHangup(reloader) }
                if watchConfig { tasks.addTask { await ConfigWatcher(reloader: reloader).run() } }
            }
            // Whichever ends first (the group, or the second signal) ends the others.
            try await tasks.next()
            tasks.cancelAll()
            try await tasks.waitForAll()
        }
        logger.info("stopped")
    }
}
