import Foundation

/// A destination's URL as summaries and logs show it: scheme, host and port (a wrong port
/// is a likely mistake); never credentials, the query or the path, which can each hold a
/// token (a Slack or Zapier hook's path is its secret). A path is shown as `/…`.
public enum ShownURL {
    public static func of(_ text: String) -> String {
        guard let url = URL(string: text), let host = url.host else { return "(an unreadable URL)" }
        let port = url.port.map { ":\($0)" } ?? ""
        let path = url.path.isEmpty || url.path == "/" ? "" : "/…"
        return "\(url.scheme ?? "")://\(host)\(port)\(path)"
    }
}
