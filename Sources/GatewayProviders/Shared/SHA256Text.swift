import Crypto
import Foundation

/// SHA-256 as 64 lowercase hex digits: how dedupe keys and `raw` name content
/// without keeping it.
enum SHA256Text {
    static func hex(_ data: Data) -> String {
        SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
    }

    static func hex(_ text: String) -> String {
        hex(Data(text.utf8))
    }
}
