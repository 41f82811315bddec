/// A record id as the report breaks ties by it, without a string allocation for each of
/// a million installs: a lowercase UUID (what the gateway names records by) is kept as its
/// sixteen bytes, whose order is its text's; any other id is kept as text. Ordered as the
/// ids' text is.
struct RecordOrder: Comparable, Sendable {
    private enum Storage: Sendable {
        case uuid(UInt64, UInt64)
        case text(String)
    }

    private let storage: Storage

    init(_ id: String) {
        storage = Self.uuid(id).map { .uuid($0.0, $0.1) } ?? .text(id)
    }

    var text: String {
        switch storage {
        case .text(let text): return text
        case .uuid(let high, let low):
            let hex = Self.hex(high, 16) + Self.hex(low, 16)
            let parts = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { range in
                hex.dropFirst(range.lowerBound).prefix(range.count)
            }
            return parts.joined(separator: "-")
        }
    }

    static func < (a: RecordOrder, b: RecordOrder) -> Bool {
        if case .uuid(let aHigh, let aLow) = a.storage, case .uuid(let bHigh, let bLow) = b.storage {
            return (aHigh, aLow) < (bHigh, bLow)
        }
        return a.text < b.text
    }

    static func == (a: RecordOrder, b: RecordOrder) -> Bool { !(a < b) && !(b < a) }

    /// The two halves of a lowercase `8-4-4-4-12` UUID; nil for anything else, an
    /// upper-case one too (its text orders otherwise).
    private static func uuid(_ id: String) -> (UInt64, UInt64)? {
        var utf8 = id.utf8.makeIterator()
        var halves: (UInt64, UInt64) = (0, 0)
        var digits = 0
        var position = 0
        while let byte = utf8.next() {
            defer { position += 1 }
            if position == 8 || position == 13 || position == 18 || position == 23 {
                guard byte == UInt8(ascii: "-") else { return nil }
                continue
            }
            let nibble: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = byte - UInt8(ascii: "a") + 10
            default: return nil
            }
            if digits < 16 {
                halves.0 = halves.0 << 4 | UInt64(nibble)
            } else {
                halves.1 = halves.1 << 4 | UInt64(nibble)
            }
            digits += 1
        }
        return position == 36 && digits == 32 ? halves : nil
    }

    private static func hex(_ value: UInt64, _ width: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: width - text.count) + text
    }
}
