/// Bytes as lowercase hex digits: digests in dedupe keys, signatures and ids. One
/// spelling for every module, and without `String(format:)` per byte, which is slow on
/// Linux and ran for every AdServices token and SKAN postback.
public enum Hex {
    public static func lowercase(_ bytes: some Sequence<UInt8>) -> String {
        let digits: StaticString = "0123456789abcdef"
        var text: [UInt8] = []
        text.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            text.append(digits.utf8Start[Int(byte >> 4)])
            text.append(digits.utf8Start[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
