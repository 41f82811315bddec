import ArgumentParser
import Foundation
import GatewayCore
import GatewayEnrichers
import GatewayServer
import Logging

struct ImportSpend: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "spend",
        abstract: "Load daily keyword spend from an Apple Ads keyword report export (CSV).",
        discussion: """
            For teams without Apple Ads API access: export a custom report of keywords with daily \
            granularity from the Apple Ads web UI and load it here. Columns are found by header, below \
            any title rows: Day (or Date), Keyword ID, Spend (or Local Spend), Currency (or a header \
            such as Spend (USD)); Campaign ID, Ad Group ID and Adam ID when present. Rows of one \
            keyword's day are summed (an export split by country); each campaign's (or, with Ad Group \
            ID, ad group's) day in the file replaces what was held for it, so a corrected export can \
            be loaded again. Bad rows are listed by line and \
            column, and the exit status is 1; the good rows are loaded.
            """)

    @Option(name: .shortAndLong, help: "The configuration file (for the storage path).")
    var config = "config.yaml"

    @Argument(help: "The CSV file.")
    var file: String

    func run() async throws {
        let configuration = try loadConfiguration(config, enrichers: false)
        guard var lines = try? LineReader(path: file),
            let size = fileSize(file)
        else {
            printError("cannot read \(file)")
            throw ExitCode(2)
        }
        // The spend goes into the store's file: one a newer release upgraded is refused here too.
        if configuration.storage.postgres == nil {
            _ = try Gateway.openSQLiteStore(configuration, onWait: printError)
        }
        var reader = SpendCSVReader()
        var progress = ProgressBar(total: size, label: "reading", unit: .bytes)
        if let text = try Self.utf16Text(file) {
            // UTF-16 (Excel's "Unicode text") is not split at its `\n` bytes: read whole.
            // `\r\n` is one character to Swift, which a split at `\n` alone would not see.
            let textLines = text.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" }
            for (offset, line) in textLines.enumerated() {
                reader.feed(String(line), line: offset + 1)
            }
        } else {
            var number = 0
            while let next = try lines.next() {
                number += 1
                progress.advance(to: lines.consumed)
                guard case .text(let data) = next else {
                    reader.feed("", line: number)
                    printError("line \(number): longer than \(LineReader.maxLineBytes >> 20) MB; skipped")
                    continue
                }
                reader.feed(CSV.text(of: data), line: number)
            }
        }
        reader.finish()
        progress.finish()
        let spend = reader.spend
        let store = try await SpendImport(
            storagePath: configuration.storage.sqlitePath, storageURL: configuration.storage.postgres?.url,
            logger: Logger(label: "attribution-gateway"))
        try await store.store(spend)
        let keywords = Set(spend.map(\.keywordID)).count
        let days = Set(spend.map(\.day)).sorted()
        let range = days.first.map { first in first == days.last ? " on \(first)" : " from \(first) to \(days.last!)" }
        print(
            "\(spend.count) keyword days of \(keywords) keywords\(range ?? ""); \(reader.badRowCount) rows rejected")
        for bad in reader.badRows { print(TerminalText.visible(bad.description)) }
        if reader.badRowCount > reader.badRows.count {
            print("… and \(reader.badRowCount - reader.badRows.count) more")
        }
        if reader.badRowCount > 0 { throw ExitCode(1) }
    }

    /// The file's text when it is UTF-16, which a line reader splitting at `\n` bytes
    /// cannot read; nil for UTF-8 and Windows-1252, read line by line.
    static func utf16Text(_ path: String) throws -> String? {
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        let head = try handle.read(upToCount: 4096) ?? Data()
        let isUTF16 = head.starts(with: [0xFF, 0xFE]) || head.starts(with: [0xFE, 0xFF]) || head.contains(0)
        guard isUTF16, let data = FileManager.default.contents(atPath: path) else { return nil }
        return CSV.text(of: data)
    }
}
