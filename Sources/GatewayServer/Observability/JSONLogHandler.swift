import Foundation
import GatewayCore
import Logging
import Synchronization

/// Writes one JSON object per log line (`time`, `level`, `label`, `message`, then the
/// metadata, including the request id of request-scoped lines), for log pipelines that
/// index fields rather than parse text.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    /// The level given to this handler (or set on its logger), else the process's as it stands.
    public var logLevel: Logger.Level {
        get { ownLevel ?? sharedLevel?.level ?? .info }
        set { ownLevel = newValue }
    }
    private var ownLevel: Logger.Level?
    private let sharedLevel: LiveLogLevel?
    let label: String
    let write: @Sendable (String) -> Void

    public init(
        label: String, level: Logger.Level, write: @escaping @Sendable (String) -> Void = JSONLogHandler.standardError
    ) {
        self.label = label
        ownLevel = level
        sharedLevel = nil
        self.write = write
    }

    /// A handler whose level follows `level` as a reload changes it.
    public init(
        label: String, level: LiveLogLevel, write: @escaping @Sendable (String) -> Void = JSONLogHandler.standardError
    ) {
        self.label = label
        ownLevel = nil
        sharedLevel = level
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    private static let lock = Mutex(())

    /// Whole lines to stderr, one writer at a time so that lines never interleave.
    public static let standardError: @Sendable (String) -> Void = { line in
        lock.withLock { _ in FileHandle.standardError.write(Data((line + "\n").utf8)) }
    }

    public func log(event: LogEvent) {
        var fields: [String: JSONValue] = [
            "time": .string(ISO8601.format(Date())), "level": .string(event.level.rawValue), "label": .string(label),
            "message": .string(event.message.description), "source": .string(event.source),
        ]
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }) {
            // Hummingbird names its request id hb.request.id; one name is easier to query.
            fields[key == "hb.request.id" ? "request_id" : key] = Self.json(value)
        }
        // Only the error's type: a library's error text can hold a URL with its query (a
        // callback's secret) or a header value; call sites put a safe description in
        // metadata themselves.
        if let error = event.error { fields["error_type"] = .string(String(describing: type(of: error))) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(JSONValue.object(fields)) else { return }
        write(Self.escapingLineBreaks(String(decoding: data, as: UTF8.self)))
    }

    /// `JSONEncoder` escapes only what JSON must (below U+0020): U+2028, U+2029 and the C1
    /// controls it writes as they are, and a reader that splits lines on them, or a terminal
    /// that obeys them, would see a line a vendor's answer wrote. They can stand only in a
    /// string, where `\u` escapes them.
    static func escapingLineBreaks(_ json: String) -> String {
        guard json.unicodeScalars.contains(where: TextLogHandler.isControl) else { return json }
        var result = ""
        for scalar in json.unicodeScalars {
            if TextLogHandler.isControl(scalar) {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                result += "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    static func json(_ value: Logger.Metadata.Value) -> JSONValue {
        switch value {
        case .string(let text): .string(text)
        case .stringConvertible(let convertible): .string(convertible.description)
        case .array(let items): .array(items.map(json))
        case .dictionary(let dictionary): .object(dictionary.mapValues(json))
        }
    }
}
