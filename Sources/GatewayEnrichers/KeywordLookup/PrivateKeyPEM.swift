/// The private-key block of a PEM text. `openssl ecparam -genkey -name prime256v1 -out
/// key.pem`, as Apple's guide has it, writes an `EC PARAMETERS` block before the key, and
/// swift-crypto reads only a text holding the key alone.
enum PrivateKeyPEM {
    static let labels = ["EC PRIVATE KEY", "PRIVATE KEY"]

    /// The first `EC PRIVATE KEY` or `PRIVATE KEY` block, its armour lines included; nil
    /// when there is none.
    static func block(in text: String) -> String? {
        for label in labels {
            guard let begin = text.range(of: "-----BEGIN \(label)-----"),
                let end = text.range(of: "-----END \(label)-----", range: begin.upperBound..<text.endIndex)
            else { continue }
            return String(text[begin.lowerBound..<end.upperBound])
        }
        return nil
    }
}
