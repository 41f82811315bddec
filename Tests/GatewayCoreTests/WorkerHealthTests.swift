import Testing

@testable import GatewayCore

/// `/readyz`'s view of the sink workers.
@Suite struct WorkerHealthTests {
    /// A reload replacing a sink's worker stops the old one before the new one starts:
    /// that moment is not a stopped sink, but a worker that stops for good is.
    @Test func aSinkHandedOverToANewWorkerIsNotStopped() {
        let health = WorkerHealth()
        health.expect("hook")
        #expect(health.stoppedSinks == ["hook"])
        health.set("hook", running: true)
        health.handOver("hook")
        health.set("hook", running: false)
        #expect(health.stoppedSinks.isEmpty)
        health.set("hook", running: true)
        health.set("hook", running: false)
        #expect(health.stoppedSinks == ["hook"])
        health.forget("hook")
        #expect(health.stoppedSinks.isEmpty)
        // A removed sink's worker stopping after its batch, before it is forgotten.
        health.expect("old")
        health.set("old", running: true)
        health.handOver("old")
        health.set("old", running: false)
        #expect(health.stoppedSinks.isEmpty)
    }
}
