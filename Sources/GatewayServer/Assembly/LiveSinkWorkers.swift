import GatewayCore
import Logging
import ServiceLifecycle

/// The sink workers as they stand: one per sink config.yaml names, those of the start,
/// then each reload's (see ``LiveServices``: a changed sink's new worker starts once the
/// old one has finished its batch). Undelivered records stay in the outbox whatever
/// happens to their worker.
public final class LiveSinkWorkers: Service, Sendable {
    struct Running: Sendable {
        let worker: SinkWorker
        /// Whether its sink's destination counts every copy it is sent (see ``RecordRouter``).
        let countsEveryCopy: Bool
    }

    private let services: LiveServices<Running>
    private let health: WorkerHealth

    init(health: WorkerHealth, logger: Logger) {
        services = LiveServices(logger: logger)
        self.health = health
    }

    /// Every current worker, by sink name.
    public var workers: [SinkWorker] {
        services.values.values.map(\.worker).sorted { $0.sinkName < $1.sinkName }
    }

    public func worker(named sink: String) -> SinkWorker? {
        services.value(named: sink)?.worker
    }

    /// The sinks whose destinations count every copy they are sent.
    var countingEveryCopy: Set<String> {
        Set(services.values.values.filter(\.countsEveryCopy).map(\.worker.sinkName))
    }

    /// Runs `worker` for its sink from now on, after the sink's previous worker, if any,
    /// finished its batch.
    func start(_ worker: SinkWorker, countsEveryCopy: Bool) {
        services.start(worker.sinkName, worker, value: Running(worker: worker, countsEveryCopy: countsEveryCopy))
    }

    /// Stops `sink`'s worker after its batch; its outbox rows wait until a configuration
    /// names the sink again.
    func stop(_ sink: String) {
        // Its worker's stop is not a stopped sink at `/readyz`: it leaves, and is not
        // expected there any more, unless a later reload named it again.
        guard services.value(named: sink) != nil else { return }
        let health = health
        health.handOver(sink)
        services.stop(sink) { runsAgain in if !runsAgain { health.forget(sink) } }
    }

    public func run() async throws {
        try await services.run()
    }
}
