import Foundation

/// Typed reads from a JSON object as devices and relays actually send it: ids as numbers
/// or numeric strings, booleans as `true` or `"true"`, dates as lenient ISO-8601. Every
/// failure is a ``GatewayError`` naming the field by its dotted path.
public struct PayloadFields: Sendable {
    public let object: [String: JSONValue]
    /// The dotted path of this object in the payload, "" at the top.
    public let path: String
    /// The longest string any field may hold.
    public static let maxStringLength = 1024

    /// Whether `text` has at most ``maxStringLength`` characters. A string never has more
    /// characters than UTF-8 bytes, and its byte count is at hand, so characters (grapheme
    /// clusters, costly to find) are counted only for a string with more bytes than that.
    public static func fitsLengthLimit(_ text: String) -> Bool {
        text.utf8.count <= maxStringLength || text.count <= maxStringLength
    }

    /// `text`, or an error naming `field` when it is past ``maxStringLength`` or holds a
    /// NUL: for values read other than through ``string(_:)`` (a postback's signed
    /// fields, as received). JSON allows `\u0000`, but SQLite hands text back to C up to
    /// its first NUL, so an app id `"\u0000"` would be stored as one value and read back
    /// as another (`""`): no id or name needs one.
    public static func limited(_ text: String, field: String) throws -> String {
        guard fitsLengthLimit(text) else {
            throw GatewayError.invalid(field, "longer than \(maxStringLength) characters")
        }
        guard !text.utf8.contains(0) else {
            throw GatewayError.invalid(field, "contains a NUL character (\\u0000)")
        }
        return text
    }

    public init(_ object: [String: JSONValue], path: String = "") {
        self.object = object
        self.path = path
    }

    /// Parses a request body that must be a JSON object.
    public static func parseObject(_ body: Data) throws -> PayloadFields {
        let value = try parseJSON(body, expected: "a JSON object")
        guard case .object(let object) = value else {
            throw GatewayError(.malformedJSON, "expected a JSON object, found \(value.typeName)")
        }
        return PayloadFields(object)
    }

    /// Parses a body that holds one JSON object or an array of up to `maxCount` of them;
    /// an array's items are named `[0]`, `[1]`, … in errors.
    public static func parseObjects(_ body: Data, maxCount: Int, noun: String) throws -> [PayloadFields] {
        switch try parseJSON(body, expected: "a JSON object or an array of them") {
        case .object(let object):
            return [PayloadFields(object)]
        case .array(let array):
            // The array itself is at fault, not one field: none is named (`null`).
            guard !array.isEmpty else { throw GatewayError(.invalidField, "the array holds no \(noun)") }
            guard array.count <= maxCount else {
                throw GatewayError(.invalidField, "the array holds \(array.count); at most \(maxCount) per request")
            }
            return try array.enumerated().map { index, item in
                guard case .object(let object) = item else {
                    throw GatewayError.invalid("[\(index)]", "expected an object, found \(item.typeName)")
                }
                return PayloadFields(object, path: "[\(index)]")
            }
        case let value:
            throw GatewayError(.malformedJSON, "expected a JSON object or an array, found \(value.typeName)")
        }
    }

    static func parseJSON(_ body: Data, expected: String) throws -> JSONValue {
        guard !body.isEmpty else { throw GatewayError(.malformedJSON, "the body is empty; expected \(expected)") }
        let value: JSONValue
        do {
            value = try JSONValue.parse(body)
        } catch is JSONValue.TooDeep {
            throw GatewayError(.malformedJSON, "the body nests deeper than \(JSONValue.maxDepth) levels")
        } catch let error as JSONValue.NumberOutOfRange {
            throw GatewayError.invalid(error.path.isEmpty ? "body" : error.path, "a number past what a double holds")
        } catch {
            throw GatewayError(.malformedJSON, "the body is not valid JSON")
        }
        try refuseNUL(in: value)
        return value
    }

    /// An error naming the first field, anywhere in `value` (an unknown one, a custom
    /// property, a key), whose text holds a NUL (`\u0000`). The payload is stored and
    /// sent on whole: PostgreSQL's `jsonb` refuses a NUL, so the `postgres` sink would
    /// dead-letter the record for good, and the store's own JSON reads (forget's search,
    /// the report) would not see it.
    public static func refuseNUL(in value: JSONValue, path: String = "") throws {
        // Every payload passes here: the check itself builds no path and sorts no keys.
        guard holdsNUL(value) else { return }
        try nameNUL(in: value, path: path)
    }

    private static func holdsNUL(_ value: JSONValue) -> Bool {
        switch value {
        case .string(let text): text.utf8.contains(0)
        case .object(let object): object.contains { $0.key.utf8.contains(0) || holdsNUL($0.value) }
        case .array(let items): items.contains(where: holdsNUL)
        default: false
        }
    }

    /// Throws naming the first NUL in `value`, keys in order, so the same body always names
    /// the same field.
    private static func nameNUL(in value: JSONValue, path: String) throws {
        func name(_ key: String) -> String { joined(path, key) }
        switch value {
        case .string(let text) where text.utf8.contains(0):
            throw GatewayError.invalid(path.isEmpty ? "body" : path, "contains a NUL character (\\u0000)")
        case .object(let object):
            for (key, item) in object.sorted(by: { $0.key < $1.key }) {
                if key.utf8.contains(0) {
                    throw GatewayError.invalid(
                        name(key.replacingOccurrences(of: "\u{0}", with: "\\u0000")), "a key holds a NUL character")
                }
                try nameNUL(in: item, path: name(key))
            }
        case .array(let items):
            for (index, item) in items.enumerated() { try nameNUL(in: item, path: "\(path)[\(index)]") }
        default:
            return
        }
    }

    public func fieldPath(_ key: String) -> String {
        Self.joined(path, key)
    }

    /// The path of `key` in the object at `path` ("" for the body itself).
    static func joined(_ path: String, _ key: String) -> String {
        path.isEmpty ? key : "\(path).\(key)"
    }

    /// The value at `key`, treating JSON null as absent.
    public func value(_ key: String) -> JSONValue? {
        guard let value = object[key], value != .null else { return nil }
        return value
    }

    /// The object at `key`.
    public func object(_ key: String) throws -> PayloadFields? {
        guard let value = value(key) else { return nil }
        guard case .object(let nested) = value else {
            throw GatewayError.invalid(fieldPath(key), "expected an object, found \(value.typeName)")
        }
        return PayloadFields(nested, path: fieldPath(key))
    }

    public func requiredObject(_ key: String) throws -> PayloadFields {
        guard let nested = try object(key) else { throw GatewayError.missing(fieldPath(key)) }
        return nested
    }

    /// A string; numbers are accepted and written in decimal (app ids often arrive as numbers).
    /// An empty string counts as absent.
    public func string(_ key: String) throws -> String? {
        guard let value = value(key) else { return nil }
        let text: String
        switch value {
        case .string(let s): text = s
        case .integer(let n): text = String(n)
        default: throw GatewayError.invalid(fieldPath(key), "expected a string, found \(value.typeName)")
        }
        _ = try Self.limited(text, field: fieldPath(key))
        return text.isEmpty ? nil : text
    }

    public func requiredString(_ key: String) throws -> String {
        guard let text = try string(key) else { throw GatewayError.missing(fieldPath(key)) }
        return text
    }

    /// A 64-bit id, from a number or a numeric string: never negative, as no id of Apple's
    /// or a vendor's is.
    public func id(_ key: String) throws -> Int64? {
        guard let n = try integer(key, what: "an integer id") else { return nil }
        guard n >= 0 else { throw GatewayError.invalid(fieldPath(key), "expected an integer id, found \(n)") }
        return n
    }

    /// An integer within `range`, from a number or a numeric string.
    public func int(_ key: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let n = try integer(key, what: "an integer") else { return nil }
        guard let value = Int(exactly: n), range.contains(value) else {
            throw GatewayError.invalid(
                fieldPath(key), "must be between \(range.lowerBound) and \(range.upperBound), found \(n)")
        }
        return value
    }

    private func integer(_ key: String, what: String) throws -> Int64? {
        guard let value = value(key) else { return nil }
        switch value {
        case .integer(let n):
            return n
        case .string(let s):
            if s.isEmpty { return nil }
            // Trimmed only when needed: Foundation's trimming costs more than the parse.
            guard let n = Int64(s) ?? Int64(s.trimmingCharacters(in: .whitespaces)) else {
                throw GatewayError.invalid(fieldPath(key), "expected \(what), found '\(s.prefix(40))'")
            }
            return n
        default:
            throw GatewayError.invalid(fieldPath(key), "expected \(what), found \(value.typeName)")
        }
    }

    /// A boolean from `true`/`false`, `"true"`/`"false"` (any case) or `1`/`0`.
    public func bool(_ key: String) throws -> Bool? {
        guard let value = value(key) else { return nil }
        switch value {
        case .bool(let b): return b
        case .integer(0): return false
        case .integer(1): return true
        case .string(let s):
            switch s.lowercased() {
            case "true", "1", "yes": return true
            case "false", "0", "no": return false
            default: break
            }
        default: break
        }
        throw GatewayError.invalid(fieldPath(key), "expected true or false, found \(describe(value))")
    }

    /// An ISO-8601 date, with or without seconds and fractional seconds.
    public func date(_ key: String) throws -> Date? {
        guard let text = try string(key) else { return nil }
        guard let date = ISO8601.parse(text) else {
            throw GatewayError.invalid(fieldPath(key), "expected an ISO-8601 date such as 2020-08-04T17:18:07Z")
        }
        // A time no event can have (an iAd click in the year 0) is refused, as /v1/events
        // refuses it, not stored as it came.
        guard Self.plausibleSeconds.contains(date.timeIntervalSince1970) else {
            throw GatewayError.invalid(fieldPath(key), "expected a date from 2008 to 2099, found '\(text.prefix(40))'")
        }
        return date
    }

    /// The times a payload may give, in Unix seconds: from 2008, the App Store's first
    /// year, to 2100.
    public static let plausibleSeconds: Range<Double> = 1_199_145_600..<4_102_444_800

    private func describe(_ value: JSONValue) -> String {
        if case .string(let s) = value { return "'\(s.prefix(40))'" }
        return value.typeName
    }
}
