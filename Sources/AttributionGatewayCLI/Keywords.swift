import ArgumentParser
import Foundation
import Logging
import GatewayCore
import GatewayEnrichers
import GatewayServer

struct Keywords: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Keyword names for the keyword_lookup enricher.",
        subcommands: [Import.self])

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Load keyword, ad group and campaign names from a keyword report export (CSV).",
            discussion: """
                For teams without Apple Ads API access: the names go into the gateway's name cache, \
                which keyword_lookup reads before it asks Apple. Columns are found by header: \
                Keyword ID, Keyword, Match Type, Ad Group ID, Ad Group Name, Campaign ID, Campaign Name. \
                Bad rows are listed by line number and the exit status is 1. An id two lines name \
                differently keeps the later line's name, and is listed.
                """)

        @Option(name: .shortAndLong, help: "The configuration file (for the storage path).")
        var config = "config.yaml"

        @Argument(help: "The CSV file.")
        var file: String

        func run() async throws {
            let configuration = try loadConfiguration(config, enrichers: false)
            guard let data = FileManager.default.contents(atPath: file) else {
                printError("cannot read \(file)")
                throw ExitCode(2)
            }
            let text = CSV.text(of: data)
            // The names go into the store's file: one a newer release upgraded is refused here too.
            if configuration.storage.postgres == nil {
                _ = try Gateway.openSQLiteStore(configuration, onWait: printError)
            }
            var progress: ProgressBar?
            let names = try await KeywordReportImport(
                storagePath: configuration.storage.sqlitePath, storageURL: configuration.storage.postgres?.url,
                logger: Logger(label: "attribution-gateway"))
            let report = try await names.run(text) { done, total in
                if progress == nil { progress = ProgressBar(total: total, label: "importing") }
                progress?.advance(to: done)
            }
            progress?.finish()
            print(
                "\(report.keywords) keywords, \(report.adGroups) ad groups, \(report.campaigns) campaigns; \(report.badRows.count) rows rejected"
            )
            for bad in report.badRows { print("line \(bad.line): \(TerminalText.visible(bad.reason))") }
            if !report.renames.isEmpty {
                print("\(report.renames.count) ids named differently on two lines; the later line's name is kept:")
                for rename in report.renames.prefix(20) {
                    print("\(rename.kind) \(rename.id): line \(rename.earlierLine), then line \(rename.laterLine)")
                }
                if report.renames.count > 20 { print("and \(report.renames.count - 20) more") }
            }
            if !report.badRows.isEmpty { throw ExitCode(1) }
        }
    }
}
