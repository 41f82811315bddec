import ArgumentParser
import Foundation
import GatewayCore
import GatewayServer
import GatewayStorage

struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Queue stored records for one sink again, e.g. to backfill a sink added later.",
        discussion: """
            Only records the config's routes send to the sink are queued (a vendor with \
            require_consent gets no event without consent, a route's where: holds), and none \
            already waiting for it. The SQLite sink, webhooks keyed by record_id and Mixpanel \
            ($insert_id) take a record again without a second copy; vendors count every event they \
            are sent, so replay to them only what they lack. The running gateway (or the next `serve`) delivers them.
            """)

    @Option(name: .shortAndLong, help: "The configuration file.")
    var config = "config.yaml"
    @Option(help: "The sink to deliver to (a name under sinks:).")
    var sink: String
    @Option(help: "Only records received at or after this ISO-8601 time, or date (midnight UTC).")
    var since: String?
    @Option(help: "Only records of this provider.")
    var provider: String?

    func run() async throws {
        let configuration = try loadConfiguration(config, enrichers: false)
        guard configuration.sinks.contains(where: { $0.name == sink }) else {
            throw ValidationError(
                "no sink '\(sink)' in \(config); defined: \(configuration.sinks.map(\.name).joined(separator: ", "))")
        }
        // A misspelt provider matched no record and said "0 of 0 records queued".
        let providers = PluginRegistry.builtIn.providerTypes
        if let provider, !providers.contains(provider) {
            throw ValidationError("no provider '\(provider)'; known: \(providers.joined(separator: ", "))")
        }
        var filter = ReplayFilter(provider: provider)
        if let since {
            filter.since = try TimeOption.parse(since, option: "--since")
        }
        let router = RecordRouter(routes: configuration.routes)
        let (queued, routed, seen) = try await withExistingStore(configuration) { store in
            let total = try await store.countRecords(matching: filter)
            var progress = ProgressBar(total: total, label: "replaying")
            var cursor: Int64 = 0
            var seen = 0, routed = 0, queued = 0
            while true {
                let page = try await store.readableRecords(matching: filter, after: cursor, limit: 1000)
                if page.records.isEmpty { break }
                // A body that cannot be read is queued: the worker dead-letters it, in sight.
                let ids = page.records.filter { $0.record.map { router.sinks(for: $0).contains(sink) } ?? true }
                    .map(\.recordID)
                queued += try await store.enqueue(recordIDs: ids, sink: sink, now: Date())
                routed += ids.count
                seen += page.records.count
                cursor = page.cursor
                progress.advance(to: seen)
            }
            progress.finish()
            return (queued, routed, seen)
        }
        var notes: [String] = []
        if routed < seen { notes.append("\(seen - routed) not routed to it") }
        if queued < routed { notes.append("\(routed - queued) already waiting for it") }
        print(
            "\(queued) of \(seen) records queued for \(sink)"
                + (notes.isEmpty ? "" : " (\(notes.joined(separator: ", ")))"))
    }
}
