import Foundation
import GatewayCore
import Logging

/// `log_format: text`: swift-log's plain lines (`TIME LEVEL LABEL : key=value [SOURCE]
/// MESSAGE`), with control characters escaped. A message or metadata value can quote what
/// a client sent (an event name a vendor refused); a line feed in it would otherwise start
/// a line that looks like the gateway's own.
public struct TextLogHandler: LogHandler {
    /// The level and metadata, and where lines go, as JSON lines keep them.
    var lines: JSONLogHandler

    public init(
        label: String, level: Logger.Level, write: @escaping @Sendable (String) -> Void = JSONLogHandler.standardError
    ) {
        lines = JSONLogHandler(label: label, level: level, write: write)
    }

    /// A handler whose level follows `level` as a reload changes it.
    public init(
        label: String, level: LiveLogLevel, write: @escaping @Sendable (String) -> Void = JSONLogHandler.standardError
    ) {
        lines = JSONLogHandler(label: label, level: level, write: write)
    }

    public var metadata: Logger.Metadata {
        get { lines.metadata }
        set { lines.metadata = newValue }
    }

    public var logLevel: Logger.Level {
        get { lines.logLevel }
        set { lines.logLevel = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { lines.metadata[key] }
        set { lines.metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let (label, write) = (lines.label, lines.write)
        let merged = metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 })
        let pairs = merged.sorted { $0.key < $1.key }.map { " \(Self.escaped($0.key))=\(Self.text($0.value))" }
        write(
            "\(ISO8601.format(Date())) \(event.level) \(Self.escaped(label)) :\(pairs.joined())"
                + " [\(Self.escaped(event.source))] \(Self.escaped(event.message.description))")
    }

    static func text(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let text): escaped(text)
        case .stringConvertible(let convertible): escaped(convertible.description)
        case .array(let items): "[" + items.map(text).joined(separator: ", ") + "]"
        case .dictionary(let dictionary):
            "[" + dictionary.sorted { $0.key < $1.key }.map(pair).joined(separator: ", ") + "]"
        }
    }

    static func pair(_ entry: (key: String, value: Logger.Metadata.Value)) -> String {
        "\(escaped(entry.key)): \(text(entry.value))"
    }

    /// `text` with C0 controls, DEL, and the Unicode line and paragraph separators written as
    /// escapes (`\n`, `\r`, `\t`, `\u{1B}`): each log call stays one line, and a terminal
    /// shows no escape sequence a client wrote.
    static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where isControl(scalar): result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029
    }
}
