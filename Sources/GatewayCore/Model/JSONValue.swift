import Foundation

/// Any JSON value, kept as received so that `raw` and `events` survive a round trip.
public enum JSONValue: Sendable, Hashable, Codable {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        // Each failed attempt throws a DecodingError, which is costly: try the likeliest first.
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([String: JSONValue].self) {
            self = .object(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else {
            self = .array(try container.decode([JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The deepest nesting a document may have. Payloads nest three or four levels; a
    /// limit keeps hostile input from costing stack or time.
    public static let maxDepth = 32

    /// Thrown by ``parse(_:)`` for a document nested deeper than ``maxDepth``.
    public struct TooDeep: Error {}

    /// Thrown by ``parse(_:)`` for a number valid in JSON but past what a double holds
    /// (`1e309`), with where it is: `a.b[2]`, or "" at the top.
    public struct NumberOutOfRange: Error {
        public internal(set) var path: String

        /// The same number, found inside `place` (a key, or `[index]`).
        func inside(_ place: String) -> NumberOutOfRange {
            NumberOutOfRange(
                path: path.isEmpty ? place : path.hasPrefix("[") ? place + path : "\(place).\(path)")
        }
    }

    /// Parses a JSON document (any value at the top) with ``JSONParser``.
    public static func parse(_ data: Data) throws -> JSONValue {
        try JSONParser.parse(data)
    }

    /// Whether `data`'s top value is an array, as ``parse(_:)`` would read it (a byte order
    /// mark and whitespace before it), looking no further than its first byte.
    public static func opensArray(_ data: Data) -> Bool {
        JSONParser.opensArray(data)
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    public var objectValue: [String: JSONValue]? {
        if case .object(let object) = self { return object }
        return nil
    }

    /// The name of the JSON type, for error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .integer, .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    /// Compact JSON with sorted keys and `/` unescaped, as `JSONEncoder` with
    /// `[.sortedKeys, .withoutEscapingSlashes]` writes it for objects with ASCII keys and
    /// strings, booleans, integers and null (keys are sorted with String's `<`, which
    /// differs from the encoder's byte order for some non-ASCII keys; a double may be
    /// written differently: `1.0`, not `1`), without Codable: answers are written on every
    /// request, and JSONEncoder was a twentieth of the CPU of a request that stores nothing.
    public var compactUTF8: [UInt8] {
        var out = JSONWriter()
        out.json(self)
        return out.bytes
    }

    /// Compact JSON text with sorted keys, for storage columns and logs.
    public var jsonText: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? String(decoding: encoder.encode(self), as: UTF8.self)) ?? "null"
    }
}
