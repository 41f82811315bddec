import Foundation
import GatewayCore
import Synchronization

/// Appends records to a CSV file (RFC 4180), one row per record, with the columns the
/// config names: the example of a sink that lives outside the gateway's own modules.
///
/// Delivery is at-least-once, so the sink remembers the `record_id`s already in the file
/// (read back when it opens an existing file) and skips repeats: a crash between writing
/// and acknowledging never leaves a record in the file twice. A write cut short (a full
/// disk) is taken back, and a row a crash left half-written is removed at the next start:
/// that record was never acknowledged, and is offered again.
public final class CSVSink: AttributionSink {
    static let batchLimit = 1000
    public let maxBatchSize = batchLimit
    let url: URL
    let columns: [String]
    /// Where `record_id` is among the columns: first unless the config put it elsewhere.
    let idColumn: Int
    private let written: Mutex<Set<String>>
    /// The files open by a sink of this process: two sinks on one file would each write
    /// every record, and their appends would race.
    private static let openFiles = Mutex<Set<String>>([])

    public init(path: String, columns: [String]) throws {
        let url = URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath()
        let columns = columns.contains("record_id") ? columns : ["record_id"] + columns
        let idColumn = columns.firstIndex(of: "record_id") ?? 0
        let claimed = Self.openFiles.withLock { $0.insert(url.path).inserted }
        guard claimed else { throw CSVError("another csv sink already writes \(path)") }
        do {
            written = Mutex(try Self.open(url, columns: columns, idColumn: idColumn))
        } catch {
            _ = Self.openFiles.withLock { $0.remove(url.path) }
            throw error
        }
        self.url = url
        self.columns = columns
        self.idColumn = idColumn
    }

    deinit {
        _ = Self.openFiles.withLock { $0.remove(url.path) }
    }

    /// Creates the file with its header, or reads back the ids of an existing one. A file
    /// that cannot be read is an error, never a reason to start it again empty.
    static func open(_ url: URL, columns: [String], idColumn: Int) throws -> Set<String> {
        let manager = FileManager.default
        let folder = url.deletingLastPathComponent()
        if !manager.fileExists(atPath: folder.path) {
            // Rows hold user ids and payloads: for the gateway's user only, as the store is.
            try manager.createDirectory(
                at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        guard manager.fileExists(atPath: url.path) else {
            try create(url, columns: columns)
            return []
        }
        // Read in chunks, not mapped: a file emptied in place while mapped (logrotate's
        // copytruncate during a start) killed the process with SIGBUS.
        var scan = Scan(idColumn: idColumn, columnCount: columns.count)
        do {
            let handle = try FileHandle(forReadingFrom: url)
            defer { try? handle.close() }
            while let chunk = try handle.read(upToCount: 8 << 20), !chunk.isEmpty {
                chunk.withUnsafeBytes { scan.feed($0) }
            }
        } catch {
            throw CSVError("cannot read \(url.path): \(error.localizedDescription)")
        }
        scan.finish()
        if scan.length == 0 {
            try append(Data(), to: url, header: columns)
            return []
        }
        guard scan.validUTF8 else {
            throw CSVError(
                "\(url.path) is not UTF-8 text (saved by a spreadsheet in another encoding?); choose a new file")
        }
        guard scan.header == columns else {
            throw CSVError("\(url.path) has other columns than configured; choose a new file")
        }
        if scan.lastRowUnended {
            // Ended, never deleted: see `Scan.lastRowUnended`.
            try append(Data("\r\n".utf8), to: url)
        } else if scan.complete < scan.length {
            // A row cut short by a crash (every row is written with its line break): its
            // record was not acknowledged, and comes again. Only if the file is still as
            // read: one emptied meanwhile must not grow back to the old length.
            let handle = try FileHandle(forWritingTo: url)
            defer { try? handle.close() }
            if try handle.seekToEnd() == UInt64(scan.length) {
                try handle.truncate(atOffset: UInt64(scan.complete))
                try handle.synchronize()
            }
        }
        return scan.ids
    }

    /// The header and the `record_id`s of a file's complete rows, read byte by byte, a
    /// chunk at a time: a large file parsed whole into strings would take gigabytes, and
    /// long, before `serve` listens.
    struct Scan {
        let idColumn: Int
        let columnCount: Int
        var header: [String]?
        var ids: Set<String> = []
        /// Bytes read.
        var length = 0
        /// The length of the complete rows: up to the last line break outside quotes.
        var complete = 0
        /// Whether every complete row is UTF-8 (the cut tail may split a character).
        var validUTF8 = true
        /// The last row has every column, closed quotes and UTF-8 but no line break: whole
        /// (an editor's save), or cut inside its last cell, which cannot be told apart.
        /// Kept either way: deleting it lost an acknowledged record's row.
        var lastRowUnended = false
        /// The row being read, and where in it its id cell is.
        private var row: [UInt8] = []
        private var quoted = false
        private var cell = 0
        private var cellStart = 0
        private var id: Range<Int>?

        init(idColumn: Int, columnCount: Int) {
            self.idColumn = idColumn
            self.columnCount = columnCount
        }

        mutating func feed(_ bytes: UnsafeRawBufferPointer) {
            let quote = UInt8(ascii: "\""), comma = UInt8(ascii: ","), newline = UInt8(ascii: "\n")
            for byte in bytes {
                length += 1
                if byte == newline, !quoted {
                    let end = row.last == UInt8(ascii: "\r") ? row.count - 1 : row.count
                    if cell == idColumn { id = cellStart..<end }
                    take(row[..<end], id: id)
                    complete = length
                    row.removeAll(keepingCapacity: true)
                    cell = 0
                    cellStart = 0
                    id = nil
                    continue
                }
                row.append(byte)
                if byte == quote {
                    quoted.toggle()
                } else if byte == comma, !quoted {
                    if cell == idColumn { id = cellStart..<(row.count - 1) }
                    cell += 1
                    cellStart = row.count
                }
            }
        }

        /// The last row, if it has no line break. Its id is not taken as written: were it a
        /// row cut in its last cell, its record comes again and is written whole after it.
        mutating func finish() {
            guard !row.isEmpty, !quoted, cell + 1 == columnCount, String(validating: row, as: UTF8.self) != nil else {
                return
            }
            if header == nil { take(row[...], id: nil) }
            lastRowUnended = true
        }

        /// One row: the header, or a record's id.
        private mutating func take(_ row: ArraySlice<UInt8>, id: Range<Int>?) {
            if String(validating: row, as: UTF8.self) == nil { validUTF8 = false }
            if header == nil {
                header = CSV.parse(String(decoding: row, as: UTF8.self)).first ?? []
            } else if let id {
                ids.insert(Self.unquoted(String(decoding: row[id], as: UTF8.self)))
            }
        }

        static func unquoted(_ text: String) -> String {
            guard text.hasPrefix("\""), text.hasSuffix("\""), text.count >= 2 else { return text }
            return String(text.dropFirst().dropLast()).replacingOccurrences(of: "\"\"", with: "\"")
        }
    }

    static func headerLine(_ columns: [String]) -> Data {
        Data((CSV.row(columns) + "\r\n").utf8)
    }

    static func create(_ url: URL, columns: [String]) throws {
        guard
            FileManager.default.createFile(
                atPath: url.path, contents: headerLine(columns),
                attributes: [.posixPermissions: 0o600])
        else { throw CSVError("cannot create \(url.path)") }
    }

    /// Appends `data`, after `header` when the file is empty, or leaves the file as it was:
    /// a write cut short is taken back, so that the retry starts on a row boundary.
    static func append(_ data: Data, to url: URL, header: [String]? = nil) throws {
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        let end = try handle.seekToEnd()
        // Emptied in place (logrotate's copytruncate): rows without their header made the
        // next start refuse the file, and the whole gateway with it.
        let data = if end == 0, let header { headerLine(header) + data } else { data }
        do {
            try handle.write(contentsOf: data)
            try handle.synchronize()
        } catch {
            try? handle.truncate(atOffset: end)
            throw error
        }
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
            // Moved away (rotated): a new file with its header; the ids written stay known.
            if !FileManager.default.fileExists(atPath: url.path) { try Self.create(url, columns: columns) }
            try Self.append(Data(text.utf8), to: url, header: columns)
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
        // A misspelt field would be an empty column for good, a repeated one a wasted one.
        let known = Set(AttributionRecord.fieldNames)
        for column in columns where !known.contains(column) {
            reader.report("`\(column)` is not a record field", key: "columns")
        }
        for column in Set(columns) where columns.filter({ $0 == column }).count > 1 {
            reader.report("`\(column)` is listed twice", key: "columns")
        }
        guard let path else { return nil }
        return Options(path: path, columns: columns)
    }

    public static func makeSink(options: Options, context: SinkContext) async throws -> any AttributionSink {
        try CSVSink(path: options.path, columns: options.columns)
    }

    public static func maxBatchSize(_ options: Options) -> Int? { CSVSink.batchLimit }

    public static func summary(_ options: Options) -> String {
        let count = options.columns.contains("record_id") ? options.columns.count : options.columns.count + 1
        return "appends \(count) columns to \(options.path)"
    }
}
