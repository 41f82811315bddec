import Logging
import ServiceLifecycle
import Synchronization
import Testing

@testable import GatewayServer

/// Services a reload starts and replaces (resolvers, the quarantine's trimmer, sink
/// workers): one replaced before it could start never runs.
@Suite struct LiveServicesTests {
    final class Starts: Sendable {
        let names = Mutex<[String]>([])
    }

    /// Notes when it starts, and runs until it is asked to stop.
    struct Noting: Service {
        let name: String
        let starts: Starts

        func run() async throws {
            starts.names.withLock { $0.append(name) }
            try? await gracefulShutdown()
        }
    }

    @Test func aServiceReplacedBeforeItStartedNeverRuns() async throws {
        let starts = Starts()
        let services = LiveServices<Int>(logger: Logger(label: "test"))
        let running = Task { try await services.run() }
        services.start("trimmer", Noting(name: "first", starts: starts), value: 1)
        #expect(await eventually { starts.names.withLock { $0 } == ["first"] })
        // The second waits for the first to stop; the third replaces it before it starts.
        services.start("trimmer", Noting(name: "second", starts: starts), value: 2)
        services.start("trimmer", Noting(name: "third", starts: starts), value: 3)
        #expect(await eventually { starts.names.withLock { $0 }.count == 2 })
        #expect(starts.names.withLock { $0 } == ["first", "third"])
        #expect(services.value(named: "trimmer") == 3)
        running.cancel()
        _ = try? await running.value
    }

    /// Polls until `condition` holds or a minute passes: a deadline for a loaded machine,
    /// not a speed expectation.
    func eventually(_ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(60)
        while !condition() {
            if ContinuousClock.now > deadline { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }
}
