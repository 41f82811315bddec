import GatewayCore

/// One report built at a time, a few more waiting, the rest refused: each build reads every
/// record and holds every user, and several at once (dashboards open in many tabs) took the
/// CPU and memory that ingest needs.
actor ReportGate {
    let maxWaiting: Int
    private var running = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(maxWaiting: Int = 4) {
        self.maxWaiting = maxWaiting
    }

    var waitingCount: Int { waiting.count }

    static let busy = GatewayError(.rateLimited, "reports are being built; try again in a few seconds")

    /// Runs `build` once the builds before it are done, or refuses when too many wait.
    func run<T: Sendable>(_ build: @Sendable () async throws -> T) async throws -> T {
        if running {
            guard waiting.count < maxWaiting else { throw Self.busy }
            await withCheckedContinuation { waiting.append($0) }
        }
        running = true
        defer { handOver() }
        return try await build()
    }

    private func handOver() {
        if waiting.isEmpty {
            running = false
        } else {
            waiting.removeFirst().resume()
        }
    }
}
