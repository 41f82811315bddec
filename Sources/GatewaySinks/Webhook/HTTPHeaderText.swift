/// What HTTP allows in a header's name and value (RFC 9110 §5.1, §5.5).
enum HTTPHeaderText {
    /// A token: letters, digits and `!#$%&'*+-.^_`|~`.
    static func isName(_ text: String) -> Bool {
        !text.isEmpty
            && text.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"):
                    true
                default:
                    "!#$%&'*+-.^_`|~".utf8.contains(byte)
                }
            }
    }

    /// Visible characters, spaces and tabs: no line break that would start another header.
    static func isValue(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { $0 == "\t" || ($0.value >= 0x20 && $0.value != 0x7F) }
    }
}
