import Foundation

/// The private-key block of a PEM text. `openssl ecparam -genkey -name prime256v1 -out
/// key.pem`, as Apple's guide has it, writes an `EC PARAMETERS` block before the key, and
/// swift-crypto reads only a text holding the key alone.
enum PrivateKeyPEM {
    static let labels = ["EC PRIVATE KEY", "PRIVATE KEY"]

    /// The first `EC PRIVATE KEY` or `PRIVATE KEY` block in the text, its armour lines
    /// included and each line's indentation (a key pasted into YAML) taken off; nil when
    /// there is none.
    static func block(in text: String) -> String? {
        let lines = text.split(omittingEmptySubsequences: true, whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }
        for (start, line) in lines.enumerated() {
            guard let label = labels.first(where: { line == "-----BEGIN \($0)-----" }),
                let end = lines[start...].firstIndex(of: "-----END \(label)-----")
            else { continue }
            return lines[start...end].joined(separator: "\n") + "\n"
        }
        return nil
    }

    /// Whether the text holds a key this gateway cannot read without its passphrase.
    static func isEncrypted(_ text: String) -> Bool {
        text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") || text.contains("Proc-Type: 4,ENCRYPTED")
    }
}
