import ArgumentParser
import Foundation
import GatewayServer

/// The time a `--since` or `--until` names: an ISO-8601 time with its zone, or a bare
/// date (`2026-03-01`), read as that day's midnight UTC.
enum TimeOption {
    static func parse(_ text: String, option: String) throws -> Date {
        do {
            return try ReportTime.parse(text, option: option)
        } catch {
            throw ValidationError(error.message)
        }
    }
}
