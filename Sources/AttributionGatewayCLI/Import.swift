import ArgumentParser
import Foundation
import GatewayConfig
import GatewayCore
import GatewayProviders
import GatewayServer

/// `import --provider NAME FILE.jsonl` (historical payloads) and `import spend FILE.csv`.
struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Import historical payloads (--provider NAME FILE.jsonl) or Apple Ads spend (spend FILE.csv).",
        discussion: """
            Without a subcommand, `import --provider NAME FILE.jsonl` ingests payloads, one JSON object \
            per line, through the normal pipeline (see `import payloads --help`).
            """,
        subcommands: [ImportPayloads.self, ImportSpend.self], defaultSubcommand: ImportPayloads.self)
}

struct ImportPayloads: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "payloads",
        abstract: "Ingest a file of historical payloads (one JSON object per line) through the normal pipeline.",
        discussion: """
            Records are stored, deduplicated and routed exactly as if they had been posted; the running \
            gateway (or the next `serve`) delivers them. A line is a payload as posted, arriving now, or \
            {"received_at": "2025-03-01T12:00:00Z", "payload": {…}} for one that arrived then: the \
            record keeps that time. Lines that cannot be read are listed with their number and the exit \
            status is 1.
            """)

    @Option(help: "The provider that reads each line (e.g. iad).")
    var provider: String

    @Option(name: .shortAndLong, help: "The configuration file.")
    var config = "config.yaml"

    @Argument(help: "A JSON Lines file.")
    var file: String

    func run() async throws {
        let configuration = try loadConfiguration(config)
        let defaults = try makeProvider(named: provider)
        guard var reader = try? LineReader(path: file),
            let size = fileSize(file)
        else {
            printError("cannot read \(file)")
            throw ExitCode(2)
        }
        let gateway = try await Gateway.build(configuration: configuration, onWait: printError)
        // The config's provider, as `serve` reads a posted line: its conversion model, its
        // keys, its `on_invalid_signature`. Its defaults read history of a provider the
        // config no longer takes live.
        let provider: any AttributionProvider
        if let configured = gateway.provider(named: self.provider) {
            provider = configured
        } else {
            printError("\(self.provider) is not enabled in \(config): lines are read with its default options")
            provider = defaults
        }
        try await gateway.sqlite?.prepareWriterForImport()
        var progress = ProgressBar(total: size, label: "importing", unit: .bytes)
        var stored = 0, duplicates = 0, rejected = 0, unkeyed = 0
        // The first thousand are printed; a file of garbage must not fill the memory.
        var failures: [String] = []
        var batch: [AttributionRecord] = []

        func flush() async throws {
            for outcome in try await gateway.pipeline.ingest(batch) {
                if outcome.isDuplicate { duplicates += 1 } else { stored += 1 }
            }
            batch.removeAll(keepingCapacity: true)
            try await gateway.sqlite?.fitImportCheckpointToStore()
        }

        let blank: Set<UInt8> = [UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r")]
        var number = 0
        while let next = try reader.next() {
            number += 1
            progress.advance(to: reader.consumed)
            guard case .text(let line) = next else {
                rejected += 1
                if failures.count < 1000 {
                    failures.append("line \(number): longer than \(LineReader.maxLineBytes >> 20) MB; skipped")
                }
                continue
            }
            guard !line.allSatisfy(blank.contains) else { continue }
            do {
                let now = Date()
                let payload = try HistoricalLine(line, now: now).payload
                let records = try provider.normalize(payload)
                if payload.receivedAt == now { unkeyed += records.filter(Self.isKeyedByArrival).count }
                batch += records
            } catch let error as GatewayError {
                rejected += 1
                if failures.count < 1000 { failures.append("line \(number): \(error)") }
            }
            if batch.count >= Self.recordsPerCommit { try await flush() }
        }
        try await flush()
        try await gateway.sqlite?.checkpointAfterImport()
        progress.finish()

        print("\(stored) stored, \(duplicates) duplicates, \(rejected) lines rejected")
        for failure in failures { print(TerminalText.visible(failure)) }
        if rejected > failures.count { print("… and \(rejected - failures.count) more") }
        if unkeyed > 0 {
            printError(
                """
                \(unkeyed) events have no timestamp, event_id or transaction_id: each import of them stores them again. \
                Give each line a fixed arrival ({"received_at": "…", "payload": {…}}) to import them once.
                """)
        }
        if rejected > 0 { throw ExitCode(1) }
    }

    /// Records stored per transaction. Into a large store each record dirties a page of its
    /// own in the indexes keyed in random order, whatever the commit's size; what a larger
    /// commit saves is the rest (the tables' last pages, the busy ranges of the other
    /// indexes), written once per commit, and the commits' syncs. Not larger: a `serve`
    /// beside the import waits for each of these commits.
    static let recordsPerCommit = 2_000

    /// An S2S event the provider can tell from a second one alike only by its arrival:
    /// imported twice, it is stored twice.
    static func isKeyedByArrival(_ record: AttributionRecord) -> Bool {
        guard record.provider == S2SProvider.typeName, let event = try? RawEvent(stored: record.raw) else {
            return false
        }
        return S2SProvider.isKeyedByArrival(event)
    }
}
