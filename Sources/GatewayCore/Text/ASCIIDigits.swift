extension StringProtocol {
    /// Non-empty and ASCII digits only (`0`–`9`, no sign, no space): a number as an HTTP
    /// header or an id sends it, read by bytes rather than by `Character.isNumber`, which
    /// also takes other scripts' digits.
    public var isASCIIDigits: Bool {
        !isEmpty && utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }
}
