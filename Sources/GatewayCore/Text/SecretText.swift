import Foundation

/// Text an outside service answered, with the credentials of the request it answered
/// taken out: an error page (a proxy's, a firewall's, a debugging endpoint's) can quote
/// the request, and such text goes into dead letters and log lines.
public enum SecretText {
    /// `text` with each secret replaced by `<name>`, in each spelling a quoted request may
    /// hold it: as written, percent-encoded (as a URL's query writes it, `/` left bare, or
    /// every byte), form-encoded (`+` for a space), in a JSON string (`\/` for a slash), and
    /// in Base64 (a Basic `Authorization` header quoted back, `secret:` included). Taken out
    /// before any cut: a secret across the cut would leave its start.
    public static func removing(_ secrets: [String], from text: String, as name: String) -> String {
        var text = text
        let spellings = Set(
            secrets.filter { !$0.isEmpty }.flatMap { secret -> [String] in
                let encoded = FormEncoding.escape(secret)
                let everyByte = secret.utf8.map { byte in
                    "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
                }.joined()
                let base64 = [secret, secret + ":"].map { Data($0.utf8).base64EncodedString() }
                let spelled = [
                    secret, encoded, encoded.replacingOccurrences(of: "%20", with: "+"),
                    encoded.replacingOccurrences(of: "%2F", with: "/"),
                    secret.replacingOccurrences(of: "/", with: "\\/"), everyByte,
                ]
                // Base64 of a short value is a few letters that other words hold too.
                guard secret.count >= 8 else { return spelled }
                return spelled + base64 + base64.map { String($0.reversed().drop { $0 == "=" }.reversed()) }
            })
        // Longest first: one secret may hold another.
        for secret in spellings.sorted(by: { $0.count > $1.count }) {
            // In any case: a page may lower-case what it quotes (headers, `%2F` as `%2f`).
            text = text.replacingOccurrences(of: secret, with: "<\(name)>", options: .caseInsensitive)
        }
        return text
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: Swift.max(0, width - count)) + self
    }
}
