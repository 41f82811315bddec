import Foundation
import GatewayCore

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

    public struct Report: Sendable, Equatable {
        public var keywords = 0
        public var adGroups = 0
        public var campaigns = 0
        public var badRows: [BadRow] = []
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

    let cache: KeywordNameCache
    let now: Date

    public init(storagePath: String, now: Date = Date()) throws {
        cache = try KeywordNameCache(path: storagePath)
        self.now = now
    }

    /// Reads `text`, calling `progress` with rows done and rows in all.
    public func run(_ text: String, progress: (Int, Int) -> Void = { _, _ in }) async throws -> Report {
        var report = Report()
        let rows = CSV.parse(text)
        guard let header = rows.first else {
            report.badRows.append(BadRow(line: 1, reason: "the file is empty"))
            return report
        }
        var index: [String: Int] = [:]
        for (position, name) in header.enumerated() {
            let normalized = name.trimmingCharacters(in: .whitespaces).lowercased()
            if let column = Self.columns.first(where: { $0.value.contains(normalized) })?.key, index[column] == nil {
                index[column] = position
            }
        }
        guard index["keyword_id"] != nil, index["keyword"] != nil else {
            report.badRows.append(BadRow(line: 1, reason: "the header needs at least 'Keyword ID' and 'Keyword' columns"))
            return report
        }
        // Line numbers count the header; quoted line breaks inside cells are rare in
        // these exports, so a row's number is its position.
        for (offset, row) in rows.dropFirst().enumerated() {
            let line = offset + 2
            progress(offset + 1, rows.count - 1)
            if row.allSatisfy({ $0.trimmingCharacters(in: .whitespaces).isEmpty }) { continue }
            func cell(_ column: String) -> String? {
                guard let position = index[column], position < row.count else { return nil }
                let value = row[position].trimmingCharacters(in: .whitespaces)
                return value.isEmpty ? nil : value
            }
            func id(_ column: String) throws -> Int64? {
                guard let text = cell(column) else { return nil }
                guard let value = Int64(text), value > 0 else { throw BadID(column: column, text: text) }
                return value
            }
            do {
                guard let keywordID = try id("keyword_id") else { throw BadID(column: "keyword_id", text: "") }
                guard let keyword = cell("keyword") else {
                    report.badRows.append(BadRow(line: line, reason: "keyword is empty"))
                    continue
                }
                let adGroupID = try id("ad_group_id")
                let campaignID = try id("campaign_id")
                try await cache.store(
                    AppleAdsNameKey.keyword(keywordID), .init(name: keyword, matchType: cell("match_type")?.uppercased(), fetchedAt: now))
                report.keywords += 1
                if let adGroupID, let name = cell("ad_group_name") {
                    try await cache.store(AppleAdsNameKey.adGroup(adGroupID), .init(name: name, matchType: nil, fetchedAt: now))
                    report.adGroups += 1
                }
                if let campaignID, let name = cell("campaign_name") {
                    try await cache.store(AppleAdsNameKey.campaign(campaignID), .init(name: name, matchType: nil, fetchedAt: now))
                    report.campaigns += 1
                }
            } catch let error as BadID {
                report.badRows.append(
                    BadRow(
                        line: line,
                        reason: error.text.isEmpty
                            ? "\(error.column) is empty" : "\(error.column) '\(error.text.prefix(40))' is not a positive integer"))
            }
        }
        return report
    }

    struct BadID: Error {
        let column: String
        let text: String
    }
}
