import Foundation
import GatewayCore
import Logging

/// Loads daily keyword spend from the CSV the Apple Ads web UI exports (a custom report
/// of keywords, daily granularity) into the spend table the `keyword_lookup` enricher's
/// daily fetch fills, for teams without API access.
///
/// Fed one line at a time, so a file of any size is never held whole: a row whose quoted
/// cell spans lines is read once its quote closes. Columns are found by their header, in
/// any order and case, below up to 20 title rows (the report's name, its dates): the day
/// (`Day`, `Date`), `Keyword ID`, `Spend` (or `Local Spend`), and the currency (a
/// `Currency` column, or a header such as `Spend (USD)`); `Campaign ID`, `Ad Group ID`
/// and the app (`Adam ID`, `App ID`) when present. Rows of one keyword's day (an export
/// split by country) are summed; the file's days replace what the table held for them.
public struct SpendCSVReader: Sendable {
    /// One line that could not be read, by its 1-based line number, and the column at fault.
    public struct BadRow: Sendable, Equatable, CustomStringConvertible {
        public var line: Int
        public var column: String?
        public var reason: String

        public var description: String {
            "line \(line)" + (column.map { ", column \($0)" } ?? "") + ": \(reason)"
        }
    }

    static let columns: [String: [String]] = [
        "day": ["day", "date", "report date", "reporting date"],
        "keyword_id": ["keyword id", "keywordid", "keyword_id"],
        "campaign_id": ["campaign id", "campaignid", "campaign_id"],
        "ad_group_id": ["ad group id", "adgroupid", "ad_group_id"],
        "spend": ["spend", "local spend", "localspend", "local_spend", "spend amount"],
        "currency": ["currency", "currency code", "spend currency"],
        "app_id": ["adam id", "adamid", "app id", "app_id", "apple id"],
    ]

    /// The header's words for a column, as each shows it in an error.
    static let shown = [
        "day": "Day", "keyword_id": "Keyword ID", "campaign_id": "Campaign ID", "ad_group_id": "Ad Group ID",
        "spend": "Spend", "currency": "Currency", "app_id": "Adam ID",
    ]

    /// How many rows may stand above the header: a report's title, its date range, filters.
    static let rowsBeforeHeader = 20

    private var header: (index: [String: Int], currency: String?)?
    private var separator: Character = ","
    private var rowsSeen = 0
    /// A row whose quoted cell is still open, and the line it began on.
    private var pending: (text: String, line: Int)?
    private var entries: [String: SpendEntry] = [:]
    private var order: [String] = []
    public private(set) var badRows: [BadRow] = []
    /// Rows past the first thousand bad ones are counted, not kept.
    public private(set) var badRowCount = 0

    public init() {}

    /// Reads the file's line `number` (1-based), without its line break.
    public mutating func feed(_ text: String, line number: Int) {
        var text = text
        if text.hasSuffix("\r") { text.removeLast() }
        if number == 1, text.hasPrefix("\u{FEFF}") { text.removeFirst() }
        let start: Int
        if let open = pending {
            text = open.text + "\n" + text
            start = open.line
        } else {
            start = number
        }
        // A quoted cell left open: its line break is part of it (a `"` inside an unquoted
        // cell, `12" tablet`, opens none).
        if CSV.endsInsideQuotes(text, separator: separator) {
            pending = (text, start)
            return
        }
        pending = nil
        row(text, line: start)
    }

    /// Ends the file: an unclosed quote is a bad row, a file without a header one too.
    public mutating func finish() {
        if let open = pending {
            bad(open.line, nil, "a quoted cell is never closed")
            pending = nil
        }
        if header == nil {
            bad(
                1, nil,
                rowsSeen == 0
                    ? "the file is empty"
                    : "no header with Day (or Date), Keyword ID and Spend columns in the first \(Self.rowsBeforeHeader) rows"
            )
        }
    }

    /// The days read, one entry per keyword, day and currency.
    public var spend: [SpendEntry] { order.compactMap { entries[$0] } }

    private mutating func bad(_ line: Int, _ column: String?, _ reason: String) {
        badRowCount += 1
        if badRows.count < 1000 {
            badRows.append(BadRow(line: line, column: column.map { Self.shown[$0] ?? $0 }, reason: reason))
        }
    }

    private mutating func row(_ text: String, line: Int) {
        guard let header else {
            guard rowsSeen < Self.rowsBeforeHeader, !text.allSatisfy(\.isWhitespace) else { return }
            rowsSeen += 1
            // The separator is the one with which this row is a header: `,`, else `;` (a
            // spreadsheet in a locale whose decimal mark is the comma) or a tab.
            for separator in [",", ";", "\t"] as [Character] {
                guard let cells = CSV.numberedRows(text, separator: separator).first?.cells else { continue }
                if let found = Self.header(cells) {
                    self.header = found
                    self.separator = separator
                    return
                }
            }
            return
        }
        guard let cells = CSV.numberedRows(text, separator: separator).first?.cells,
            cells.contains(where: { !$0.trimmingCharacters(in: .whitespaces).isEmpty })
        else { return }
        func cell(_ column: String) -> String? {
            guard let position = header.index[column], position < cells.count else { return nil }
            return CSV.exportValue(cells[position])
        }
        // A totals line (`Total`, its ids empty) closes some exports: no keyword's day.
        if cell("keyword_id") == nil && (cell("day") == nil || CSV.isTotalsRow(cells)) { return }
        func id(_ column: String, required: Bool) -> Int64?? {
            guard let text = cell(column) else {
                if required { bad(line, column, "is empty") }
                return required ? nil : .some(nil)
            }
            guard let value = Int64(text), value > 0 else {
                bad(line, column, "'\(text.prefix(40))' is not a positive integer")
                return nil
            }
            return .some(value)
        }
        guard case let keyword?? = id("keyword_id", required: true),
            case let campaign? = id("campaign_id", required: false),
            case let adGroup? = id("ad_group_id", required: false)
        else { return }
        guard let dayText = cell("day") else { return bad(line, "day", "is empty") }
        guard let day = Self.day(dayText) else {
            return bad(line, "day", "'\(dayText.prefix(40))' is not a date (2026-03-01, 03/01/2026, Mar 1, 2026)")
        }
        guard let spendText = cell("spend") else { return bad(line, "spend", "is empty") }
        guard let currency = (cell("currency") ?? header.currency).flatMap(Self.currency) else {
            return bad(line, "currency", "is not a three-letter currency code")
        }
        guard let amount = Self.amount(spendText, decimalComma: separator == ";", currency: currency), amount >= 0
        else {
            return bad(line, "spend", "'\(spendText.prefix(40))' is not an amount in \(currency)")
        }
        let app = cell("app_id").flatMap { Int64($0) }.map(String.init)
        let entry = SpendEntry(
            appID: app, campaignID: campaign ?? 0, adGroupID: adGroup ?? 0, keywordID: keyword, day: day,
            currency: currency, amount: amount)
        guard SpendEntry.micros(amount) != nil else {
            return bad(line, "spend", "'\(spendText.prefix(40))' has more than 6 decimals")
        }
        if let existing = entries[entry.key] {
            entries[entry.key] = SpendEntry.summed([existing, entry])[0]
        } else {
            entries[entry.key] = entry
            order.append(entry.key)
        }
    }

    /// Where each known column stands in `cells`, and the currency a `Spend (USD)` header
    /// names; nil unless the day, the keyword id and the spend are all there.
    static func header(_ cells: [String]) -> (index: [String: Int], currency: String?)? {
        var index: [String: Int] = [:]
        var currency: String?
        for (position, name) in cells.enumerated() {
            var normalized = name.trimmingCharacters(in: .whitespaces).lowercased()
            // `Spend (USD)`: the column is spend, in that currency.
            if let open = normalized.lastIndex(of: "("), normalized.hasSuffix(")") {
                let inside = String(
                    normalized[normalized.index(after: open)..<normalized.index(before: normalized.endIndex)])
                normalized = normalized[..<open].trimmingCharacters(in: .whitespaces)
                if columns["spend"]!.contains(normalized) { currency = Self.currency(inside) }
            }
            if let column = columns.first(where: { $0.value.contains(normalized) })?.key, index[column] == nil {
                index[column] = position
            }
        }
        guard index["day"] != nil, index["keyword_id"] != nil, index["spend"] != nil else { return nil }
        return (index, currency)
    }

    static func currency(_ text: String) -> String? {
        let code = text.trimmingCharacters(in: .whitespaces).uppercased()
        guard code.utf8.count == 3, code.utf8.allSatisfy({ (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) })
        else { return nil }
        return code
    }

    /// An amount in `currency` as a spreadsheet or Apple's UI writes it: `1234.5`,
    /// `1,234.50`, `$12.00`, `12.00 USD`, `1 234,50`, or with a decimal comma (`1.234,50`,
    /// `12,5`, `7,50 €` in a `;`-separated file). Anything else in the cell (`1e3`, `12abc`),
    /// or a symbol or code of another currency than the row's (`€7.50` in a USD row, `$7.50`
    /// in a EUR one), is no amount: read loosely, those became other numbers, or another
    /// currency's, without a word.
    static func amount(_ text: String, decimalComma: Bool, currency: String) -> Decimal? {
        guard
            let match = text.trimmingCharacters(in: .whitespaces).wholeMatch(
                of:
                    /(?<before>[$€£¥]|[A-Za-z]{3})?\s*(?<number>-?[0-9]+(?:[.,][0-9]+|\s[0-9]{3})*)\s*(?<after>[A-Za-z]{3}|[$€£¥])?/
            ), match.before == nil || match.after == nil
        else { return nil }
        for mark in [match.before, match.after].compactMap(\.self) {
            if mark.count == 3, mark.uppercased() != currency { return nil }
            if let codes = Self.currenciesOfSymbol[String(mark)], !codes.contains(currency) { return nil }
        }
        var digits = match.number.filter { !$0.isWhitespace }
        let lastComma = digits.lastIndex(of: ","), lastPoint = digits.lastIndex(of: ".")
        /// Whether `mark` groups thousands: a first group of one to three digits, not a lone
        /// zero (`0.500` is a half), then groups of three.
        func groupsThousands(_ mark: Character) -> Bool {
            let groups = digits.drop { $0 == "-" }.split(separator: mark, omittingEmptySubsequences: false)
            guard let first = groups.first, (1...3).contains(first.count), first != "0" else { return false }
            return groups.dropFirst().allSatisfy { $0.count == 3 }
        }
        let commaIsDecimal: Bool
        switch (lastComma, lastPoint) {
        case (let comma?, let point?): commaIsDecimal = comma > point
        case (_?, nil):
            // `1,234` is a thousand in a comma-separated file; `12,5` is twelve and a half.
            commaIsDecimal = decimalComma || !groupsThousands(",")
        case (nil, _?):
            // `1.234` is a thousand in a `;`-separated file, which writes decimals with commas.
            commaIsDecimal = decimalComma && groupsThousands(".")
        default: commaIsDecimal = false
        }
        if commaIsDecimal {
            digits = digits.replacingOccurrences(of: ".", with: "").replacingOccurrences(of: ",", with: ".")
        } else {
            digits = digits.replacingOccurrences(of: ",", with: "")
        }
        guard digits.wholeMatch(of: /-?\d+(\.\d+)?/) != nil else { return nil }
        return Decimal(string: digits, locale: Locale(identifier: "en_US_POSIX"))
    }

    /// The currencies a symbol in an amount may stand for.
    static let currenciesOfSymbol: [String: Set<String>] = [
        "€": ["EUR"], "£": ["GBP"], "¥": ["JPY", "CNY"],
        "$": ["USD", "CAD", "AUD", "NZD", "SGD", "HKD", "MXN", "TWD", "BRL", "ARS", "CLP", "COP"],
    ]

    /// Month names as the UI writes them in English: `Mar 1, 2026`, `1 March 2026`.
    private static let namedDayFormats = ["MMM d, yyyy", "MMMM d, yyyy", "d MMM yyyy", "d MMMM yyyy"]

    /// A day as `YYYY-MM-DD`, from the ways the UI and spreadsheets write one: `2026-03-01`
    /// (a time after it is dropped), `2026/03/01`, `03/01/2026` (month first, as the UI in
    /// English writes it), `01.03.2026`, `Mar 1, 2026`.
    static func day(_ text: String) -> String? {
        func checked(_ year: Substring, _ month: Substring, _ day: Substring) -> String? {
            guard let y = Int(year), let m = Int(month), let d = Int(day), (1...12).contains(m), d >= 1,
                let date = Calendar.utc.date(from: DateComponents(year: y, month: m, day: d)),
                Calendar.utc.component(.day, from: date) == d
            else { return nil }
            return SpendDay.string(date)
        }
        if let match = text.wholeMatch(of: /(\d{4})[-\/](\d{1,2})[-\/](\d{1,2})([ T].*)?/) {
            return checked(match.1, match.2, match.3)
        }
        if let match = text.wholeMatch(of: /(\d{1,2})\/(\d{1,2})\/(\d{4})/) {
            return checked(match.3, match.1, match.2)
        }
        if let match = text.wholeMatch(of: /(\d{1,2})\.(\d{1,2})\.(\d{4})/) {
            return checked(match.3, match.2, match.1)
        }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.isLenient = false
        for format in namedDayFormats {
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return SpendDay.string(date) }
        }
        return nil
    }
}

/// Writes what a ``SpendCSVReader`` read into the spend table beside the store.
public struct SpendImport {
    let store: any SpendStore

    /// Into the spend table beside the store: its PostgreSQL database when `storageURL` is
    /// set, else its SQLite file.
    public init(storagePath: String, storageURL: PostgresURL?, logger: Logger) async throws {
        store = try await SpendStorage.open(storagePath: storagePath, storageURL: storageURL, logger: logger)
    }

    /// Stores `entries` in one transaction, replacing the days of the campaigns they name,
    /// or of the ad groups where they name those (an export holds every keyword that spent
    /// in what it covers), and, without a campaign, their keywords' days; and notes their
    /// campaigns for the daily fetch. One call for a whole file: in parts, each part would
    /// clear again the days an earlier one wrote.
    public func store(_ entries: [SpendEntry]) async throws {
        let scopes = Set(
            entries.filter { $0.campaignID > 0 }.map {
                SpendScope(campaignID: $0.campaignID, adGroupID: $0.adGroupID, day: $0.day)
            })
        try await store.replace(entries, scopes: Array(scopes))
        var campaigns: [Int64: Int64?] = [:]
        for entry in entries where entry.campaignID > 0 { campaigns[entry.campaignID] = .some(nil) }
        try await store.noteCampaigns(campaigns)
    }
}
