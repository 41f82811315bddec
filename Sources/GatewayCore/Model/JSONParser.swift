import Foundation

/// Parses JSON text (RFC 8259) straight into ``JSONValue``. JSONSerialization builds
/// Foundation objects that then have to be cast back one by one (bridging and dynamic
/// casts are a large share of ingest's CPU); this reads the bytes once. Integers that fit
/// stay exact (`Int64`), other numbers are doubles; strings must be valid UTF-8; nesting
/// deeper than ``JSONValue/maxDepth`` throws ``JSONValue/TooDeep``.
struct JSONParser {
    struct Invalid: Error {}

    private let bytes: UnsafeRawBufferPointer
    private let maxDepth: Int
    private var index = 0

    static func parse(_ data: Data, maxDepth: Int = JSONValue.maxDepth) throws -> JSONValue {
        try data.withUnsafeBytes { buffer in
            var parser = JSONParser(bytes: buffer, maxDepth: maxDepth)
            parser.skipPreamble()
            let value = try parser.value(depth: 0)
            parser.skipWhitespace()
            guard parser.index == buffer.count else { throw Invalid() }
            return value
        }
    }

    private init(bytes: UnsafeRawBufferPointer, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    /// Whether the text's top value is an array, read no further than its first byte.
    static func opensArray(_ data: Data) -> Bool {
        data.withUnsafeBytes { buffer in
            var parser = JSONParser(bytes: buffer, maxDepth: 0)
            parser.skipPreamble()
            return parser.current == UInt8(ascii: "[")
        }
    }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    /// Past what may come before the top value: a byte order mark, which some clients put
    /// before UTF-8 JSON, and whitespace.
    private mutating func skipPreamble() {
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
        skipWhitespace()
    }

    private mutating func skipWhitespace() {
        while let b = current, b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 { index += 1 }
    }

    private mutating func expect(_ literal: StaticString) throws {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw Invalid() }
        for offset in 0..<count where bytes[index + offset] != literal.utf8Start[offset] { throw Invalid() }
        index += count
    }

    private mutating func value(depth: Int) throws -> JSONValue {
        guard let b = current else { throw Invalid() }
        switch b {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"):
            try expect("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expect("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expect("null")
            return .null
        default: return try number()
        }
    }

    private mutating func object(depth: Int) throws -> JSONValue {
        if depth > maxDepth { throw JSONValue.TooDeep() }
        index += 1
        // Members are gathered first and the dictionary made once at its size: growing it
        // member by member would rehash it several times.
        var members: [(String, JSONValue)] = []
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            index += 1
            return .object([:])
        }
        while true {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else { throw Invalid() }
            let key = try string()
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { throw Invalid() }
            index += 1
            skipWhitespace()
            do {
                members.append((key, try value(depth: depth)))
            } catch let error as JSONValue.NumberOutOfRange {
                // Named only on the way out of a failure: no cost to a document that parses.
                throw error.inside(key)
            }
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                // A repeated key keeps its last value, as JSONSerialization does.
                return .object(Dictionary(members, uniquingKeysWith: { _, last in last }))
            default: throw Invalid()
            }
        }
    }

    private mutating func array(depth: Int) throws -> JSONValue {
        if depth > maxDepth { throw JSONValue.TooDeep() }
        index += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if current == UInt8(ascii: "]") {
            index += 1
            return .array(items)
        }
        while true {
            skipWhitespace()
            do {
                items.append(try value(depth: depth))
            } catch let error as JSONValue.NumberOutOfRange {
                throw error.inside("[\(items.count)]")
            }
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return .array(items)
            default: throw Invalid()
            }
        }
    }

    private mutating func string() throws -> String {
        index += 1
        let start = index
        // The common case: no escapes, so the bytes are the string.
        while let b = current, b != UInt8(ascii: "\""), b != UInt8(ascii: "\\") {
            guard b >= 0x20 else { throw Invalid() }
            index += 1
        }
        guard let stop = current else { throw Invalid() }
        if stop == UInt8(ascii: "\"") {
            index += 1
            return try text(UnsafeRawBufferPointer(rebasing: bytes[start..<index - 1]))
        }
        var utf8 = Array(bytes[start..<index])
        while true {
            guard let b = current else { throw Invalid() }
            index += 1
            switch b {
            case UInt8(ascii: "\""):
                return try text(utf8)
            case UInt8(ascii: "\\"):
                try escape(into: &utf8)
            case 0..<0x20:
                throw Invalid()
            default:
                utf8.append(b)
            }
        }
    }

    private func text(_ utf8: UnsafeRawBufferPointer) throws -> String {
        // ASCII needs no validation, and `String(decoding:)` takes it at memcpy speed;
        // `String(validating:)` was four fifths of the time spent on strings.
        if utf8.allSatisfy({ $0 < 0x80 }) { return String(decoding: utf8, as: UTF8.self) }
        guard let text = String(validating: utf8, as: UTF8.self) else { throw Invalid() }
        return text
    }

    private func text(_ utf8: [UInt8]) throws -> String {
        try utf8.withUnsafeBytes { try text($0) }
    }

    private mutating func escape(into utf8: inout [UInt8]) throws {
        guard let b = current else { throw Invalid() }
        index += 1
        switch b {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(b)
        case UInt8(ascii: "b"): utf8.append(0x08)
        case UInt8(ascii: "f"): utf8.append(0x0C)
        case UInt8(ascii: "n"): utf8.append(0x0A)
        case UInt8(ascii: "r"): utf8.append(0x0D)
        case UInt8(ascii: "t"): utf8.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try hex4()
            if (0xD800...0xDBFF).contains(scalar) {
                // A high surrogate must be followed by an escaped low one.
                try expect("\\u")
                let low = try hex4()
                guard (0xDC00...0xDFFF).contains(low) else { throw Invalid() }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw Invalid()
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw Invalid() }
            utf8.append(contentsOf: String(Character(unicode)).utf8)
        default:
            throw Invalid()
        }
    }

    private mutating func hex4() throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw Invalid() }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[index]
            let digit: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = b - UInt8(ascii: "A") + 10
            default: throw Invalid()
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    private mutating func number() throws -> JSONValue {
        let start = index
        if current == UInt8(ascii: "-") { index += 1 }
        guard let first = current, isDigit(first) else { throw Invalid() }
        index += 1
        if first != UInt8(ascii: "0") {
            while let b = current, isDigit(b) { index += 1 }
        }
        var integral = true
        if current == UInt8(ascii: ".") {
            integral = false
            index += 1
            guard let b = current, isDigit(b) else { throw Invalid() }
            while let b = current, isDigit(b) { index += 1 }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            integral = false
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard let b = current, isDigit(b) else { throw Invalid() }
            while let b = current, isDigit(b) { index += 1 }
        }
        // Up to 18 digits cannot overflow Int64: read them without making a string.
        if integral, index - start <= 18 {
            var n: Int64 = 0
            let negative = bytes[start] == UInt8(ascii: "-")
            for b in bytes[(negative ? start + 1 : start)..<index] { n = n * 10 + Int64(b - UInt8(ascii: "0")) }
            return .integer(negative ? -n : n)
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if integral, let n = Int64(text) { return .integer(n) }
        guard let d = Double(text) else { throw Invalid() }
        guard d.isFinite else { throw JSONValue.NumberOutOfRange(path: "") }
        return .double(d)
    }

    private func isDigit(_ b: UInt8) -> Bool {
        b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")
    }
}
