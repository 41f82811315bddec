import ArgumentParser
import Foundation
import Logging
import GatewayCore
import GatewayEnrichers
import GatewayServer
import GatewayStorage

struct Report: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Reports over the stored records.", subcommands: [KeywordsReport.self])
}

struct KeywordsReport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keywords",
        abstract: "Which keywords and campaigns bring paying users.",
        discussion: """
            Joins each user's install (their first attributed one: AdServices, iAd or a vendor's \
            callback; else organic when the source answered none, else unknown when Apple never \
            answered) to their purchases (the ASA SDK's associate-user, /v1/events), by app and \
            user, and sums per campaign, ad group and keyword: installs, paying users, purchases \
            and revenue per currency; with Apple Ads spend (fetched daily by keyword_lookup, or \
            loaded by import spend), spend over the period, cost per install and per paying user, \
            and ROAS (revenue over spend, where both are in one currency). A purchase counts once per app and transaction, credited to \
            the best-attributed user that claimed it; a refunded one (/v1/events type refund) counts \
            under refunds instead. Reads the store, so it sees every record \
            whatever the routes.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case table, csv, json
    }

    @Option(name: .shortAndLong, help: "The configuration file.")
    var config = "config.yaml"
    @Option(
        help:
            "Only purchases made at or after this ISO-8601 time, or date (midnight UTC); installs count from any time.")
    var since: String?
    @Option(help: "Only purchases made before this ISO-8601 time, or date (midnight UTC).")
    var until: String?
    @Option(help: "Only this app.")
    var appID: String?
    @Option(help: "Only this network's lines (organic, unknown, unattributed, Apple Search Ads, a vendor's).")
    var network: String?
    @Option(
        help:
            "Only installs in this country or region (two letters: US, GB) and the purchases credited to them; no spend."
    )
    var country: String?
    @Option(help: "table, csv or json.")
    var format: Format = .table

    func run() async throws {
        let configuration = try loadConfiguration(config, enrichers: false)
        func time(_ text: String?, _ option: String) throws -> Date? {
            guard let text else { return nil }
            return try TimeOption.parse(text, option: option)
        }
        if let network, let problem = KeywordReportQuery.problem(network: network) {
            throw ValidationError("--network: \(problem)")
        }
        let code = try country.map { text in
            guard let code = KeywordReportQuery.country(text) else {
                throw ValidationError("--country: expected a two-letter country or region code (US, GB)")
            }
            return code
        }
        let query = KeywordReportQuery(
            appID: appID, purchasesSince: try time(since, "--since"), purchasesUntil: try time(until, "--until"),
            network: network, country: code)
        // On stderr, so that the report on stdout stays clean for a pipe or a file.
        var progress: ProgressBar?
        func known() async throws -> KnownNames {
            try await KnownNames(
                storagePath: configuration.storage.sqlitePath,
                storageURL: configuration.storage.postgres?.url, logger: Logger(label: "attribution-gateway"))
        }
        let rows = try await withExistingStore(configuration) { store in
            try await KeywordReportReader.rows(
                from: store, query,
                names: { keys in try await known().names(keys) },
                spend: { from, until in try await known().spend(from: from, until: until) },
                progress: { read, total in
                    if progress == nil { progress = ProgressBar(total: total, label: "reading") }
                    progress?.advance(to: read)
                })
        }
        progress?.finish()
        let filtered = appID != nil || since != nil || until != nil || network != nil || country != nil
        print(Self.render(rows, format: format, filtered: filtered))
    }

    /// `app` last: columns added later go at the end, so that scripts reading `csv` by
    /// position keep working.
    static let header = [
        "network", "campaign", "ad group", "keyword", "match", "installs", "paying", "conv %", "purchases", "revenue",
        "refunds", "app", "spend", "cost/install", "cost/paying", "roas",
    ]

    static func cells(_ row: KeywordReport.Row) -> [String] {
        func named(_ name: String?, _ id: Int64?) -> String {
            switch (name, id) {
            case (let name?, _): name
            case (nil, let id?): "#\(id)"
            case (nil, nil): ""
            }
        }
        let conversion = KeywordReport.conversion(row.convertedInstalls, of: row.installs)
        func money(_ amounts: [String: Decimal]?) -> String {
            (amounts ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: "; ")
        }
        let revenue = money(row.revenue)
        return [
            row.network ?? "", named(row.campaign, row.campaignID), named(row.adGroup, row.adGroupID),
            named(row.keyword, row.keywordID), row.matchType ?? "", String(row.installs), String(row.payingUsers),
            conversion, String(row.purchases), revenue, String(row.refunds), row.appID, money(row.spend),
            money(row.costPerInstall), money(row.costPerPayingUser), money(row.roas),
        ]
    }

    static func render(_ rows: [KeywordReport.Row], format: Format, filtered: Bool = false) -> String {
        switch format {
        case .csv:
            return ([header] + rows.map(cells)).map(CSV.row).joined(separator: "\n")
        case .json:
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            return TerminalText.visibleJSON(
                String(decoding: (try? encoder.encode(rows)) ?? Data("[]".utf8), as: UTF8.self))
        case .table:
            // A keyword may hold a line break or a tab (iAd's routes take them): shown
            // escaped, so that a row stays one line.
            let table = [header] + rows.map { cells($0).map(TerminalText.visible) }
            let widths = header.indices.map { column in table.map { $0[column].count }.max() ?? 0 }
            if rows.isEmpty {
                return filtered
                    ? "no installs or purchases match these options" : "no installs or purchases recorded yet"
            }
            return table.map { line in
                zip(line, widths).map { cell, width in cell.padding(toLength: width, withPad: " ", startingAt: 0) }
                    .joined(separator: "  ").trimmingCharacters(in: .whitespaces)
            }.joined(separator: "\n")
        }
    }
}
