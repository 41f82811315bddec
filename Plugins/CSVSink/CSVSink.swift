import Foundation
import GatewayCore
import Synchronization

/// Appends records to a CSV file (RFC 4180), one row per record, with the columns the
/// config names: the example of a sink that lives outside the gateway's own modules.
///
/// Delivery is at-least-once, so the sink remembers the `record_id`s already in the file
/// (read back when it opens an existing file) and skips repeats: a crash between writing
/// and acknowledging never leaves a record in the file twice.
public final class CSVSink: AttributionSink {
    public let maxBatchSize = 1000
    let url: URL
    let columns: [String]
    private let written: Mutex<Set<String>>

    public init(path: String, columns: [String]) throws {
        url = URL(fileURLWithPath: path)
        self.columns = columns.contains("record_id") ? columns : ["record_id"] + columns
        try FileManager.default.createDirectory(
            at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        var known: Set<String> = []
        if let existing = try? String(contentsOf: url, encoding: .utf8), !existing.isEmpty {
            let rows = CSV.parse(existing)
            guard let header = rows.first, header == self.columns else {
                throw CSVError("\(path) has other columns than configured; choose a new file")
            }
            known = Set(rows.dropFirst().compactMap(\.first))
        } else {
            FileManager.default.createFile(atPath: path, contents: Data((CSV.row(self.columns) + "\r\n").utf8))
        }
        written = Mutex(known)
    }

    public func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
        let fresh = written.withLock { known in records.filter { !known.contains($0.recordID) } }
        if !fresh.isEmpty {
            let encoder = AttributionRecord.makeEncoder()
            var text = ""
            for record in fresh {
                let object = try JSONValue.parse(encoder.encode(record)).objectValue ?? [:]
                text += CSV.row(columns.map { CSV.cell(object[$0]) }) + "\r\n"
            }
            let handle = try FileHandle(forWritingTo: url)
            defer { try? handle.close() }
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(text.utf8))
            try handle.synchronize()
            written.withLock { known in fresh.forEach { known.insert($0.recordID) } }
        }
        return Array(repeating: .delivered, count: records.count)
    }
}

struct CSVError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// RFC 4180 cells and rows.
extension CSV {
    static func cell(_ value: JSONValue?) -> String {
        switch value {
        case nil, .null: ""
        case .string(let s): s
        case .bool(let b): b ? "true" : "false"
        case .integer(let n): String(n)
        case .double(let d): String(d)
        case .some(let nested): nested.jsonText
        }
    }
}

/// Registers the CSV sink as `type: csv`.
public enum CSVSinkPlugin: SinkPlugin {
    public struct Options: Sendable {
        public var path: String
        public var columns: [String]
    }

    public static let typeName = "csv"
    static let defaultColumns = [
        "record_id", "received_at", "provider", "app_id", "app_user_id", "attributed", "kind", "campaign_id",
        "campaign_name", "ad_group_id", "ad_group_name", "keyword_id", "keyword", "country_or_region", "revenue",
        "currency",
    ]

    public static func readOptions(_ reader: ConfigReader, context: SinkContext) -> Options? {
        // Relative to config.yaml's folder, as every file the config names.
        let path = reader.requiredString("path").flatMap { _ in reader.filePath("path") }
        let columns = reader.stringList("columns") ?? defaultColumns
        if columns.isEmpty { reader.report("needs at least one column", key: "columns") }
        guard let path else { return nil }
        return Options(path: path, columns: columns)
    }

    public static func makeSink(options: Options, context: SinkContext) async throws -> any AttributionSink {
        try CSVSink(path: options.path, columns: options.columns)
    }

    public static func summary(_ options: Options) -> String {
        "appends \(options.columns.count) columns to \(options.path)"
    }
}
