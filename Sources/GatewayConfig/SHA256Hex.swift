import Crypto

/// SHA-256 digests of API keys, so that config holds and memory keeps only hashes.
public enum SHA256Hex {
    public static func digest(_ text: String) -> [UInt8] {
        Array(SHA256.hash(data: Array(text.utf8)))
    }

    /// 64 hex digits → 32 bytes, or nil.
    public static func decode(_ hex: String) -> [UInt8]? {
        let chars = Array(hex.lowercased().utf8)
        guard chars.count == 64 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: 64, by: 2) {
            guard let byte = UInt8(String(decoding: chars[index..<index + 2], as: UTF8.self), radix: 16) else {
                return nil
            }
            bytes.append(byte)
        }
        return bytes
    }
}
