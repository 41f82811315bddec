import Crypto
import Foundation
import GatewayCore

/// The `X-Gateway-Signature` header: `t=UNIX_SECONDS,v1=HEX`, where HEX is the
/// HMAC-SHA256, keyed with the sink's secret, of `UNIX_SECONDS + "." + body`.
///
/// Signing the timestamp with the body lets a receiver reject replays: it recomputes the
/// HMAC, compares in constant time, and refuses timestamps older than a few minutes.
public enum WebhookSignature {
    public static let header = "X-Gateway-Signature"

    public static func sign(body: Data, secret: String, timestamp: Int) -> String {
        sign(body: body, secrets: [secret], timestamp: timestamp)
    }

    /// One `v1=` per secret, in order (a secret and the one it replaces, during a rotation).
    public static func sign(body: Data, secrets: [String], timestamp: Int) -> String {
        (["t=\(timestamp)"] + secrets.map { "v1=\(Hex.lowercase(mac(body: body, secret: $0, timestamp: timestamp)))" })
            .joined(separator: ",")
    }

    /// Checks a header value as a receiver would: a valid MAC and a timestamp within
    /// `tolerance` seconds of `now`.
    public static func verify(header: String, body: Data, secret: String, now: Int, tolerance: Int = 300) -> Bool {
        var timestamp: Int?
        var signatures: [String] = []
        for part in header.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2 else { continue }
            if pair[0] == "t" { timestamp = Int(pair[1]) }
            if pair[0] == "v1" { signatures.append(pair[1]) }
        }
        guard let timestamp, abs(now - timestamp) <= tolerance else { return false }
        let key = SymmetricKey(data: Data(secret.utf8))
        return signatures.contains { candidate in
            guard let bytes = unhex(candidate) else { return false }
            return HMAC<SHA256>.isValidAuthenticationCode(
                bytes, authenticating: Data("\(timestamp).".utf8) + body, using: key)
        }
    }

    static func mac(body: Data, secret: String, timestamp: Int) -> HMAC<SHA256>.MAC {
        HMAC<SHA256>.authenticationCode(
            for: Data("\(timestamp).".utf8) + body, using: SymmetricKey(data: Data(secret.utf8)))
    }

    static func unhex(_ text: String) -> Data? {
        guard text.count % 2 == 0 else { return nil }
        var data = Data(capacity: text.count / 2)
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            guard let byte = UInt8(text[index..<next], radix: 16) else { return nil }
            data.append(byte)
            index = next
        }
        return data
    }
}
