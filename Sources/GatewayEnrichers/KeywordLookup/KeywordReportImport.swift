import Foundation
import GatewayCore
import Logging

/// Loads keyword, ad group and campaign names from a keyword report export (CSV) into
/// the same cache the `keyword_lookup` enricher reads, for teams without API access.
/// Columns are found by their header, in any order and case: keyword id, keyword (text),
/// match type, ad group id, ad group name, campaign id, campaign name.
public struct KeywordReportImport {
    /// One line that could not be read, by its 1-based line number in the file.
    public struct BadRow: Sendable, Equatable {
        public var line: Int
        public var reason: String
    }

    /// An id two lines name differently: the later line's name is the one kept.
    public struct Rename: Sendable, Equatable {
        /// `keyword`, `ad group` or `campaign`.
        public var kind: String
        public var id: Int64
        public var earlierLine: Int
        public var laterLine: Int
    }

    /// Distinct ids named, of each kind.
    public struct Report: Sendable, Equatable {
        public var keywords = 0
        public var adGroups = 0
        public var campaigns = 0
        public var badRows: [BadRow] = []
        public var renames: [Rename] = []
    }

    static let columns: [String: [String]] = [
        "keyword_id": ["keyword id", "keywordid", "keyword_id"],
        "keyword": ["keyword", "keyword text", "text"],
        "match_type": ["match type", "matchtype", "match_type"],
        "ad_group_id": ["ad group id", "adgroupid", "ad_group_id"],
        "ad_group_name": ["ad group name", "ad group", "adgroupname", "ad_group_name"],
        "campaign_id": ["campaign id", "campaignid", "campaign_id"],
        "campaign_name": ["campaign name", "campaign", "campaignname", "campaign_name"],
    ]

    let cache: any KeywordNameStore
    let now: Date

    /// Where each known column stands in `header`, by its first cell of that name.
    static func columnIndex(_ header: [String]) -> [String: Int] {
        var index: [String: Int] = [:]
        for (position, name) in header.enumerated() {
            let normalized = name.trimmingCharacters(in: .whitespaces).lowercased()
            if let column = columns.first(where: { $0.value.contains(normalized) })?.key, index[column] == nil {
                index[column] = position
            }
        }
        return index
    }

    /// The cell separator with which one of the first rows is a header: `,`, else `;` (a
    /// spreadsheet saving in a locale whose decimal mark is the comma) or a tab (its
    /// "Unicode text"). A title row above the header cannot decide it.
    static func separator(of text: String) -> Character {
        var lines = 0
        let end =
            text.utf8.firstIndex { byte in
                if byte == UInt8(ascii: "\n") { lines += 1 }
                return lines == rowsBeforeHeader
            } ?? text.utf8.endIndex
        let head = String(text[..<end])
        return [",", ";", "\t"].first { separator in
            CSV.numberedRows(head, separator: separator).contains { isHeader(columnIndex($0.cells)) }
        } ?? ","
    }

    /// A header names at least the keyword's id and its text.
    static func isHeader(_ index: [String: Int]) -> Bool {
        index["keyword_id"] != nil && index["keyword"] != nil
    }

    static func isBlank(_ row: [String]) -> Bool {
        row.allSatisfy { $0.trimmingCharacters(in: .whitespaces).isEmpty }
    }

    /// Into the names beside the store: its PostgreSQL database when `storageURL` is set,
    /// else its SQLite file.
    public init(storagePath: String, storageURL: PostgresURL?, logger: Logger, now: Date = Date()) async throws {
        cache = try await KeywordNameStorage.open(storagePath: storagePath, storageURL: storageURL, logger: logger)
        self.now = now
    }

    /// How many rows may stand above the header: a report's title, its date range.
    static let rowsBeforeHeader = 20

    /// Reads `text`, calling `progress` with rows done and rows in all.
    public func run(_ text: String, progress: (Int, Int) -> Void = { _, _ in }) async throws -> Report {
        var report = Report()
        let all = CSV.numberedRows(text, separator: Self.separator(of: text))
        guard all.contains(where: { !Self.isBlank($0.cells) }) else {
            report.badRows.append(BadRow(line: 1, reason: "the file is empty"))
            return report
        }
        // The header is the first row naming the two columns needed, not always the first
        // row: an export may open with its report's name and dates.
        guard
            let (headerRow, index) = all.prefix(Self.rowsBeforeHeader).enumerated().lazy
                .map({ ($0.offset, Self.columnIndex($0.element.cells)) })
                .first(where: { Self.isHeader($0.1) })
        else {
            report.badRows.append(
                BadRow(
                    line: 1,
                    reason:
                        "no header with at least 'Keyword ID' and 'Keyword' columns in the first \(Self.rowsBeforeHeader) rows"
                ))
            return report
        }
        let numbered = Array(all.dropFirst(headerRow))
        let rows = numbered.map(\.cells)
        var entries: [String: KeywordNameEntry] = [:]
        // The line each entry's name came from, so that a second name for one id is
        // reported rather than silently replacing the first (an export spanning a rename).
        var lineOf: [String: Int] = [:]
        func put(_ kind: String, _ id: Int64, _ key: String, _ entry: KeywordNameEntry, line: Int) {
            if let earlier = entries[key], earlier.name != entry.name, let earlierLine = lineOf[key] {
                report.renames.append(Rename(kind: kind, id: id, earlierLine: earlierLine, laterLine: line))
            }
            entries[key] = entry
            lineOf[key] = line
        }
        var named: (keywords: Set<Int64>, adGroups: Set<Int64>, campaigns: Set<Int64>) = ([], [], [])
        for (offset, row) in rows.dropFirst().enumerated() {
            let line = numbered[offset + 1].line
            progress(offset + 1, rows.count - 1)
            if Self.isBlank(row) { continue }
            func cell(_ column: String) -> String? {
                guard let position = index[column], position < row.count else { return nil }
                return CSV.exportValue(row[position])
            }
            // A totals line closes some exports, as `import spend` skips it too.
            if cell("keyword_id") == nil && CSV.isTotalsRow(row) { continue }
            // Names reach records, and the records' text fields are held to 1,024
            // characters without control characters wherever else they come from.
            func name(_ column: String) throws -> String? {
                guard let text = cell(column) else { return nil }
                guard PayloadFields.fitsLengthLimit(text),
                    !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
                else {
                    throw BadID(
                        column: column, text: text,
                        reason:
                            "is longer than \(PayloadFields.maxStringLength) characters or holds a control character")
                }
                return text
            }
            func id(_ column: String) throws -> Int64? {
                guard let text = cell(column) else { return nil }
                guard let value = Int64(text), value > 0 else { throw BadID(column: column, text: text) }
                return value
            }
            do {
                guard let keywordID = try id("keyword_id") else { throw BadID(column: "keyword_id", text: "") }
                guard let keyword = try name("keyword") else {
                    report.badRows.append(BadRow(line: line, reason: "keyword is empty"))
                    continue
                }
                let adGroupID = try id("ad_group_id")
                let campaignID = try id("campaign_id")
                let matchType = try KeywordMatchType.normalized(name("match_type"))
                let adGroupName = try name("ad_group_name")
                let campaignName = try name("campaign_name")
                put(
                    "keyword", keywordID, AppleAdsNameKey.keyword(keywordID),
                    .init(name: keyword, matchType: matchType, fetchedAt: now), line: line)
                named.keywords.insert(keywordID)
                if let adGroupID, let adGroupName {
                    put(
                        "ad group", adGroupID, AppleAdsNameKey.adGroup(adGroupID),
                        .init(name: adGroupName, matchType: nil, fetchedAt: now), line: line)
                    named.adGroups.insert(adGroupID)
                }
                if let campaignID, let campaignName {
                    put(
                        "campaign", campaignID, AppleAdsNameKey.campaign(campaignID),
                        .init(name: campaignName, matchType: nil, fetchedAt: now), line: line)
                    named.campaigns.insert(campaignID)
                }
            } catch let error as BadID {
                report.badRows.append(
                    BadRow(
                        line: line,
                        reason: error.text.isEmpty
                            ? "\(error.column) is empty" : "\(error.column) '\(error.text.prefix(40))' \(error.reason)")
                )
            }
        }
        try await cache.store(entries)
        (report.keywords, report.adGroups, report.campaigns) = (
            named.keywords.count, named.adGroups.count, named.campaigns.count
        )
        return report
    }

    struct BadID: Error {
        let column: String
        let text: String
        var reason = "is not a positive integer"
    }
}
