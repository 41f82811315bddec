/// Builds the dedupe keys that providers give their records.
///
/// The parts come from payloads, so a `:` inside one must not let two different payloads
/// share a key (`app "1:2", user "3"` and `app "1", user "2:3"`). Each part has `%` and
/// `:` percent-encoded, which leaves ordinary ids readable and unchanged.
public enum DedupeKey {
    /// A key as the stores compare it: by its UTF-8 bytes. Swift's `String` equality is
    /// canonical equivalence (`é` as one scalar or as `e` and an accent, the Kelvin sign
    /// and `K`), where SQLite and PostgreSQL compare bytes; a lookup by `String` found as a
    /// duplicate what the store then kept as a record of its own.
    public struct Bytes: Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
        public let utf8: [UInt8]

        public init(_ key: String) {
            utf8 = Array(key.utf8)
        }

        public init(stringLiteral key: String) {
            self.init(key)
        }

        public var description: String { String(decoding: utf8, as: UTF8.self) }
    }

    public static func make(_ provider: String, _ parts: String...) -> String {
        ([provider] + parts.map(escape)).joined(separator: ":")
    }

    /// Looks at bytes, not characters: `contains(where:)` on a String breaks it into
    /// grapheme clusters, which showed in the iAd route's profile. (A `:` or `%` that
    /// shares a cluster with a neighbour, such as a combining mark, a joiner or a
    /// variation selector after it or a prepended mark before it, was not found as a
    /// character and was left unescaped before; it is escaped now, as every other is.)
    static func escape(_ part: String) -> String {
        guard part.utf8.contains(where: { $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "%") }) else { return part }
        var escaped: [UInt8] = []
        escaped.reserveCapacity(part.utf8.count + 8)
        for byte in part.utf8 {
            switch byte {
            case UInt8(ascii: "%"): escaped.append(contentsOf: "%25".utf8)
            case UInt8(ascii: ":"): escaped.append(contentsOf: "%3A".utf8)
            default: escaped.append(byte)
            }
        }
        return String(decoding: escaped, as: UTF8.self)
    }
}
