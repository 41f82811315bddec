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

    /// JSON text with the hidden characters JSONEncoder leaves as they are (DEL, C1
    /// controls such as CSI, bidi marks, line separators) written as `\uXXXX` escapes:
    /// the same JSON to a parser, nothing a terminal acts on. Line breaks and tabs are the
    /// pretty-printed layout (JSONEncoder escapes those within strings); every other one
    /// is in the BMP and can only stand inside a string, so the text stays valid JSON.
    static func visibleJSON(_ json: String) -> String {
        func escaped(_ scalar: Unicode.Scalar) -> Bool { isHidden(scalar) && !["\n", "\r", "\t"].contains(scalar) }
        guard json.unicodeScalars.contains(where: escaped) else { return json }
        var text = String.UnicodeScalarView()
        for scalar in json.unicodeScalars {
            if escaped(scalar) {
                let hex = String(scalar.value, radix: 16)
                text.append(contentsOf: "\\u\(String(repeating: "0", count: 4 - hex.count))\(hex)".unicodeScalars)
            } else {
                text.append(scalar)
            }
        }
        return String(text)
    }

    /// Control characters, the bidi marks that reorder what follows them, and the line and
    /// paragraph separators.
    static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.generalCategory == .control || (0x202A...0x202E).contains(scalar.value)
            || (0x2066...0x2069).contains(scalar.value)
            || [0x200E, 0x200F, 0x061C, 0x2028, 0x2029].contains(scalar.value)
    }
}
