import ArgumentParser
import Foundation
import GatewayCore

/// The time a `--since` or `--until` names: an ISO-8601 time with its zone, or a bare
/// date (`2026-03-01`), read as that day's midnight UTC.
enum TimeOption {
    static func parse(_ text: String, option: String) throws -> Date {
        if let date = ISO8601.parse(text) { return date }
        if text.wholeMatch(of: /\d{4}-\d{2}-\d{2}/) != nil, let date = ISO8601.parse(text + "T00:00:00Z") {
            return date
        }
        if text.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?/) != nil {
            throw ValidationError("\(option) needs a time zone: \(text)Z for UTC, or an offset such as \(text)+01:00")
        }
        throw ValidationError("\(option) is not an ISO-8601 time or date (2026-03-01, 2026-03-01T09:00:00Z)")
    }
}
