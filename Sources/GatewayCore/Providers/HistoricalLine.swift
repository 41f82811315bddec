import Foundation

/// A line of an `import` file: a provider's payload as it was posted, or, for history, the
/// payload with the time it first arrived somewhere, `{"received_at": "…", "payload": …}`.
/// That time becomes the record's `received_at`: the report places installs and purchases
/// by it when the payload has no time of its own, a vendor is told it as the event's time,
/// and an S2S event without a timestamp keeps one dedupe key however often it is imported.
public struct HistoricalLine: Sendable {
    public let payload: IngestPayload

    /// The earliest `received_at` taken: before the App Store, a time is a mistake (a null
    /// read as 0, seconds read as milliseconds), not history.
    public static let earliest = ISO8601.parse("2008-07-10T00:00:00Z")!
    /// How far past `now` a `received_at` may be, for clocks that disagree a little.
    public static let skew: TimeInterval = 300

    /// Reads `line`; one that is not an envelope (any other object or array) is the payload
    /// itself, arriving `now`.
    public init(_ line: Data, now: Date) throws {
        // Parsed twice only when it may be an envelope.
        guard line.range(of: Data(#""payload""#.utf8)) != nil,
            let object = (try? JSONValue.parse(line))?.objectValue, object["payload"] != nil,
            object.keys.contains(where: Self.namesReceivedAt)
        else {
            payload = IngestPayload(body: line, receivedAt: now)
            return
        }
        // An envelope with a typo would otherwise reach the provider as its payload, whose
        // answer ("missing app_id") would not say what is wrong.
        let others = object.keys.filter { $0 != "payload" && $0 != "received_at" }.sorted()
        guard others.isEmpty else {
            let found = others.map { "'\($0)'" }.joined(separator: ", ")
            guard object["received_at"] != nil else {
                throw GatewayError(
                    .missingField, "an import envelope has received_at beside payload; found \(found)",
                    field: "received_at")
            }
            throw GatewayError.invalid(others[0], "an import envelope has only received_at and payload; found \(found)")
        }
        guard case .string(let text) = object["received_at"], let receivedAt = ISO8601.parse(text) else {
            throw GatewayError.invalid(
                "received_at", "expected the time the payload first arrived, in ISO 8601 (2025-03-01T12:00:00Z)")
        }
        guard receivedAt >= Self.earliest else {
            throw GatewayError.invalid("received_at", "\(text) is before the App Store opened")
        }
        guard receivedAt <= now.addingTimeInterval(Self.skew) else {
            throw GatewayError.invalid("received_at", "\(text) is in the future")
        }
        switch object["payload"] {
        case .object?, .array?: break
        default:
            throw GatewayError.invalid("payload", "expected the payload as posted: a JSON object or array")
        }
        payload = IngestPayload(
            body: Data(object["payload"]!.compactUTF8), receivedAt: receivedAt, hasFixedArrival: true)
    }

    /// `received_at`, or a typo of it (two edits at most: `recieved_at`, `received-at`),
    /// which beside `payload` marks an envelope to refuse rather than a payload to read.
    static func namesReceivedAt(_ key: String) -> Bool {
        let target = Array("received_at"), word = Array(key.lowercased())
        guard abs(word.count - target.count) <= 2 else { return false }
        var previous = Array(0...target.count)
        for (i, letter) in word.enumerated() {
            var row = [i + 1]
            for (j, expected) in target.enumerated() {
                row.append(min(previous[j + 1] + 1, row[j] + 1, previous[j] + (letter == expected ? 0 : 1)))
            }
            previous = row
        }
        return previous[target.count] <= 2
    }
}
