import Foundation

/// A destination's URL as summaries and logs show it: scheme, host, port (a wrong port is
/// a likely mistake) and path; never credentials or the query, which can hold a token.
public enum ShownURL {
    public static func of(_ text: String) -> String {
        guard let url = URL(string: text), let host = url.host else { return "(an unreadable URL)" }
        let port = url.port.map { ":\($0)" } ?? ""
        return "\(url.scheme ?? "")://\(host)\(port)\(url.path)"
    }
}
