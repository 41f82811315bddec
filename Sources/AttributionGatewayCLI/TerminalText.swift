/// Text from records or files, made safe to print on a terminal: a name an app or a CSV
/// chose may hold a line break (splitting a table row), an escape sequence (retitling or
/// clearing the terminal) or a bidi override (showing a line reversed).
enum TerminalText {
    static func visible(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isHidden) else { return text }
        return text.unicodeScalars.map { scalar in
            switch scalar {
            case "\n": "\\n"
            case "\r": "\\r"
            case "\t": "\\t"
            case _ where isHidden(scalar): "\\u{\(String(scalar.value, radix: 16))}"
            default: String(scalar)
            }
        }.joined()
    }

    /// Control characters, the bidi marks that reorder what follows them, and the line and
    /// paragraph separators.
    static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.generalCategory == .control || (0x202A...0x202E).contains(scalar.value)
            || (0x2066...0x2069).contains(scalar.value) || [0x200E, 0x200F, 0x061C, 0x2028, 0x2029].contains(scalar.value)
    }
}
