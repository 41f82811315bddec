import Crypto
import Foundation
import GatewayCore

/// SHA-256 as 64 lowercase hex digits: how dedupe keys and `raw` name content
/// without keeping it.
enum SHA256Text {
    static func hex(_ data: Data) -> String {
        Hex.lowercase(SHA256.hash(data: data))
    }

    static func hex(_ text: String) -> String {
        hex(Data(text.utf8))
    }
}
