import AsyncHTTPClient
import Foundation
import GatewayCore
import GatewayHTTP
import NIOCore

/// Sends events to Mixpanel's `/import` in strict mode, which names each refused event
/// by its index: those go to the dead-letter queue with Mixpanel's message while the
/// rest of the batch counts as delivered.
struct MixpanelImport: Sendable {
    let endpoint: String
    let token: String
    let timeout: Duration
    let client: HTTPClient

    /// Mixpanel takes up to 2,000 events per request.
    static let maxEvents = 2000
    /// Mixpanel's docs now say 10 MB; 2 MB, the older limit, is still safe.
    static let maxRequestBytes = 2_000_000

    /// Sends `events` (each with the index of its record) and writes each record's outcome.
    func send(_ events: [(index: Int, event: JSONValue)], into outcomes: inout [DeliveryOutcome]) async throws {
        var start = 0
        while start < events.count {
            let end = min(events.count, start + Self.maxEvents)
            try await sendChunk(Array(events[start..<end]), into: &outcomes)
            start = end
        }
    }

    func sendChunk(_ events: [(index: Int, event: JSONValue)], into outcomes: inout [DeliveryOutcome]) async throws {
        guard !events.isEmpty else { return }
        let body = try JSONEncoder().encode(events.map(\.event))
        if body.count > Self.maxRequestBytes && events.count > 1 {
            try await sendChunk(Array(events[..<(events.count / 2)]), into: &outcomes)
            try await sendChunk(Array(events[(events.count / 2)...]), into: &outcomes)
            return
        }
        var request = HTTPClientRequest(url: endpoint + "/import?strict=1")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Accept", value: "application/json")
        // The project token as the user name with an empty password, as Mixpanel allows.
        request.headers.add(name: "Authorization", value: "Basic " + Data("\(token):".utf8).base64EncodedString())
        request.body = .bytes(ByteBuffer(bytes: body))

        let status: Int
        let text: String
        let retryAfter: Duration?
        let location: String?
        do {
            let exchange = try await client.exchange(request, timeout: timeout, bodyLimit: 4 << 20)
            let response = exchange.response
            status = Int(response.status.code)
            retryAfter = response.headers.first(name: "Retry-After").flatMap { RetryAfter.parse($0) }
            location = response.headers.first(name: "Location")
            text = String(buffer: try exchange.body.get())
        } catch {
            throw MixpanelSink.Unavailable(description: "Mixpanel unreachable: \(OutboundFailure.describe(error))")
        }

        func all(_ outcome: DeliveryOutcome) {
            for event in events { outcomes[event.index] = outcome }
        }
        switch status {
        case 200..<300:
            // Mixpanel's answer counts what it imported; in strict mode every event, or a
            // 400. A 2xx without that count (a proxy's page) or with fewer is no proof
            // the events are there: sent again, Mixpanel drops copies by `$insert_id`.
            let imported = (try? JSONValue.parse(Data(text.utf8)))?["num_records_imported"]
            guard case .integer(let count)? = imported else {
                all(
                    .retry(
                        reason:
                            "Mixpanel /import answered \(status) without num_records_imported: not Mixpanel's answer"))
                return
            }
            if count < events.count {
                all(
                    .retry(
                        reason: "Mixpanel /import answered \(status) with \(count) of \(events.count) events imported"))
            }
        case 400:
            // Strict mode: the failed events by index (or by `$insert_id`); the others were
            // imported.
            let answer = try? JSONValue.parse(Data(text.utf8))
            guard case .array(let failed)? = answer?["failed_records"], !failed.isEmpty else {
                all(.reject(reason: "Mixpanel /import answered 400: \(MixpanelRefusal.reason(text, token: token))"))
                return
            }
            var refused: Set<Int> = []
            var unplaced = 0
            for failure in failed {
                guard let position = Self.position(of: failure, in: events) else {
                    unplaced += 1
                    continue
                }
                var reason = "Mixpanel /import"
                if case .string(let field)? = failure["field"] { reason += ": \(field)" }
                if case .string(let message)? = failure["message"] { reason += ": \(message)" }
                outcomes[events[position].index] = .reject(reason: reason)
                refused.insert(position)
            }
            // A refusal it did not place, or fewer imported than the rest: which events are
            // in Mixpanel is not known, so the rest is sent again (copies dropped by
            // `$insert_id`), not counted delivered.
            let imported: Int64? =
                if case .integer(let count)? = answer?["num_records_imported"] { count } else { nil }
            if unplaced > 0 || imported.map({ $0 < events.count - refused.count }) == true {
                let reason =
                    "Mixpanel /import refused \(failed.count) of \(events.count) events without naming each: sent again"
                for position in events.indices where !refused.contains(position) {
                    outcomes[events[position].index] = .retry(reason: reason)
                }
            }
        case 413 where events.count > 1:
            try await sendChunk(Array(events[..<(events.count / 2)]), into: &outcomes)
            try await sendChunk(Array(events[(events.count / 2)...]), into: &outcomes)
        case 429, 500...599:
            // Mixpanel asks for at least 2 s before a retry.
            all(
                .retry(
                    reason: "Mixpanel /import answered \(status)", after: max(retryAfter ?? .seconds(2), .seconds(2))))
        case 401, 403:
            all(.retry(reason: "Mixpanel /import answered \(status): check the project token", after: .zero))
        case _ where RedirectAnswer.contains(status):
            let redirect = RedirectAnswer.describe(status: status, location: location)
            all(.retry(reason: "Mixpanel /import answered \(redirect)", after: .zero))
        default:
            all(.reject(reason: "Mixpanel /import answered \(status): \(MixpanelRefusal.reason(text, token: token))"))
        }
    }

    /// Where in `events` a failure of Mixpanel's strict answer points: by `index`, or by the
    /// event's `$insert_id` (named `insert_id` in one of Mixpanel's pages, `$insert_id` in another).
    static func position(of failure: JSONValue, in events: [(index: Int, event: JSONValue)]) -> Int? {
        if case .integer(let index)? = failure["index"], events.indices.contains(Int(index)) { return Int(index) }
        for key in ["$insert_id", "insert_id"] {
            guard case .string(let insertID)? = failure[key] else { continue }
            return events.firstIndex { event in
                if case .string(let sent)? = event.event["properties"]?["$insert_id"] {
                    sent == insertID
                } else {
                    false
                }
            }
        }
        return nil
    }
}
