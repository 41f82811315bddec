import ArgumentParser
import Foundation
import GatewayConfig
import GatewayCore
import GatewayServer

struct Normalize: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Normalise one payload from stdin and print the record(s) as JSON; no server, no storage.",
        discussion: """
            Reads what a line of `import` may hold, {"received_at": …, "payload": …} included. Exits 1 \
            with the error (its code, field and message) on stderr when the payload cannot be read.
            """)

    @Option(help: "The provider that reads the payload (e.g. iad).")
    var provider: String

    func run() throws {
        let provider = try makeProvider(named: provider)
        let body = FileHandle.standardInput.readDataToEndOfFile()
        do {
            let records = try provider.normalize(try HistoricalLine(body, now: Date()).payload)
            let encoder = AttributionRecord.makeEncoder()
            encoder.outputFormatting.insert(.prettyPrinted)
            let output = records.count == 1 ? try encoder.encode(records[0]) : try encoder.encode(records)
            print(TerminalText.visibleJSON(String(decoding: output, as: UTF8.self)))
        } catch let error as GatewayError {
            printError(error.description)
            throw ExitCode(1)
        }
    }
}

/// A provider built with its default options, for offline commands.
func makeProvider(named name: String) throws -> any AttributionProvider {
    let registry = PluginRegistry.builtIn
    let diagnostics = ConfigDiagnostics(file: "--provider")
    let reader = ConfigReader(node: ConfigNode(.null), path: name, diagnostics: diagnostics, environment: [:])
    guard let prepared = registry.prepareProvider(type: name, reader: reader) else {
        printError("unknown provider '\(name)'; available: \(registry.providerTypes.joined(separator: ", "))")
        throw ExitCode(2)
    }
    guard let prepared else {
        printError(ConfigError(issues: diagnostics.issues).description)
        throw ExitCode(2)
    }
    return try prepared.build()
}
