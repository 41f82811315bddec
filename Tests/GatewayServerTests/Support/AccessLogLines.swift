import Foundation

/// The access log's lines (`"message": "request"`) among JSON log lines, parsed.
func accessLogLines(_ lines: [String]) -> [[String: Any]] {
    lines.compactMap { line in (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] }
        .filter { $0["message"] as? String == "request" }
}
