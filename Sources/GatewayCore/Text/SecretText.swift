import Foundation

/// Text an outside service answered, with the credentials of the request it answered
/// taken out: an error page (a proxy's, a firewall's, a debugging endpoint's) can quote
/// the request, and such text goes into dead letters and log lines.
public enum SecretText {
    /// `text` with each secret replaced by `<name>`, in each spelling a quoted request may
    /// hold it: as written, percent-encoded (every byte, or `/` left bare), form-encoded
    /// (`+` for a space), and in a JSON string (`\/` for a slash). Taken out before any
    /// cut: a secret across the cut would leave its start.
    public static func removing(_ secrets: [String], from text: String, as name: String) -> String {
        var text = text
        let spellings = Set(
            secrets.filter { !$0.isEmpty }.flatMap { secret -> [String] in
                let encoded = FormEncoding.escape(secret)
                return [
                    secret, encoded, encoded.replacingOccurrences(of: "%20", with: "+"),
                    encoded.replacingOccurrences(of: "%2F", with: "/"),
                    secret.replacingOccurrences(of: "/", with: "\\/"),
                ]
            })
        // Longest first: one secret may hold another.
        for secret in spellings.sorted(by: { $0.count > $1.count }) {
            // In any case: a page may lower-case what it quotes (headers, `%2F` as `%2f`).
            text = text.replacingOccurrences(of: secret, with: "<\(name)>", options: .caseInsensitive)
        }
        return text
    }
}
