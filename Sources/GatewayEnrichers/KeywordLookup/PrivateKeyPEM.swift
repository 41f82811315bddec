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
        // A byte-order mark (an editor's UTF-8 with BOM) is no indentation either.
        let lines = text.split(omittingEmptySubsequences: true, whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: Self.indentation) }
        for (start, line) in lines.enumerated() {
            guard let label = labels.first(where: { line == "-----BEGIN \($0)-----" }),
                let end = lines[start...].firstIndex(of: "-----END \(label)-----")
            else { continue }
            return lines[start...end].joined(separator: "\n") + "\n"
        }
        return nil
    }

    static let indentation = CharacterSet.whitespaces.union(CharacterSet(charactersIn: "\u{FEFF}"))

    /// A DER key (binary ASN.1, starting with a SEQUENCE) rather than PEM text.
    static func isBinary(_ data: Data) -> Bool {
        data.first == 0x30
            && !data.prefix(64).allSatisfy { $0 == 0x09 || $0 == 0x0A || $0 == 0x0D || (0x20..<0x7F).contains($0) }
    }

    /// Whether the text holds a key this gateway cannot read without its passphrase.
    static func isEncrypted(_ text: String) -> Bool {
        text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") || text.contains("Proc-Type: 4,ENCRYPTED")
    }
}
