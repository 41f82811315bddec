extension StringProtocol {
    /// The text without leading and trailing white space (what
    /// `CharacterSet.whitespacesAndNewlines` names), without Foundation: on Linux its
    /// `trimmingCharacters(in:)` goes through NSString, and for a 1 KB AdServices token
    /// that costs a noticeable share of the route's CPU, with nothing to trim.
    public func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        var start = scalars.startIndex
        var end = scalars.endIndex
        while start < end, Self.isWhitespace(scalars[start]) { start = scalars.index(after: start) }
        while end > start, Self.isWhitespace(scalars[scalars.index(before: end)]) {
            end = scalars.index(before: end)
        }
        if start == scalars.startIndex && end == scalars.endIndex { return String(self) }
        // Scalar by scalar: a combining mark after a trimmed space must not keep the space.
        return String(String.UnicodeScalarView(scalars[start..<end]))
    }

    /// Foundation's set is Unicode's White_Space plus the zero-width space (U+200B, white
    /// space in older Unicode versions); compared over every scalar.
    private static func isWhitespace(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.isWhitespace || scalar.value == 0x200B
    }
}
