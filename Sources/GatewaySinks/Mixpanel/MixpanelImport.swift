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
            // Strict mode: the failed events by index; the others were imported.
            let answer = try? JSONValue.parse(Data(text.utf8))
            guard case .array(let failed)? = answer?["failed_records"], !failed.isEmpty else {
                all(.reject(reason: "Mixpanel /import answered 400: \(MixpanelRefusal.reason(text, token: token))"))
                return
            }
            for failure in failed {
                guard case .integer(let index)? = failure["index"], events.indices.contains(Int(index)) else {
                    continue
                }
                var reason = "Mixpanel /import"
                if case .string(let field)? = failure["field"] { reason += ": \(field)" }
                if case .string(let message)? = failure["message"] { reason += ": \(message)" }
                outcomes[events[Int(index)].index] = .reject(reason: reason)
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
}
