import ArgumentParser
import Foundation
import GatewayCore
import GatewayServer
import GatewayStorage

struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Queue stored records for one sink again, e.g. to backfill a sink added later.",
        discussion: """
            Records already waiting for the sink are not queued twice; sinks write idempotently by \
            record_id, so replaying what a sink already has does not duplicate it. The running \
            gateway (or the next `serve`) delivers them.
            """)

    @Option(name: .shortAndLong, help: "The configuration file.")
    var config = "config.yaml"
    @Option(help: "The sink to deliver to (a name under sinks:).")
    var sink: String
    @Option(help: "Only records received at or after this ISO-8601 time.")
    var since: String?
    @Option(help: "Only records of this provider.")
    var provider: String?

    func run() async throws {
        let configuration = try loadConfiguration(config)
        guard configuration.sinks.contains(where: { $0.name == sink }) else {
            throw ValidationError(
                "no sink '\(sink)' in \(config); defined: \(configuration.sinks.map(\.name).joined(separator: ", "))")
        }
        var filter = ReplayFilter(provider: provider)
        if let since {
            guard let date = ISO8601.parse(since) else { throw ValidationError("--since is not an ISO-8601 time") }
            filter.since = date
        }
        let (queued, seen) = try await withExistingStore(configuration) { store in
            let total = try await store.countRecords(matching: filter)
            var progress = ProgressBar(total: total, label: "replaying")
            var cursor: Int64 = 0
            var seen = 0, queued = 0
            while true {
                let page = try await store.recordIDs(matching: filter, after: cursor, limit: 1000)
                if page.ids.isEmpty { break }
                queued += try await store.enqueue(recordIDs: page.ids, sink: sink, now: Date())
                seen += page.ids.count
                cursor = page.cursor
                progress.advance(to: seen)
            }
            progress.finish()
            return (queued, seen)
        }
        print("\(queued) of \(seen) records queued for \(sink)")
    }
}
