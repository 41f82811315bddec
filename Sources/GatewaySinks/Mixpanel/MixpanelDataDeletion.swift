import AsyncHTTPClient
import Foundation
import GatewayCore
import GatewayHTTP
import NIOCore

/// Mixpanel's GDPR data-deletion API (v3.0): a forget request's user ids are sent once as
/// a deletion task, whose status is then read every `gdpr_check_every_s` until Mixpanel
/// says it succeeded or failed (it may take up to 30 days). The task's id travels as the
/// request's progress note, so a restart or another replica reads the same task.
struct MixpanelDataDeletion: Sendable {
    let options: MixpanelSink.Options
    let client: HTTPClient

    static let notePrefix = "mixpanel deletion task "
    /// Mixpanel takes at most this many ids per deletion.
    static let maxIDs = 1999

    static func task(inNote note: String) -> String? {
        note.hasPrefix(notePrefix) ? String(note.dropFirst(notePrefix.count)) : nil
    }

    var base: String {
        let host = options.gdprEndpoint
        return (host.hasSuffix("/") ? String(host.dropLast()) : host) + "/api/app/data-deletions/v3.0/"
    }

    var tokenQuery: String {
        "token=" + (options.token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
    }

    /// Asks for the deletion of the users' events; in progress with the task's id.
    func ask(distinctIDs: [String]) async throws -> ForgetOutcome {
        guard !distinctIDs.isEmpty else { return .done }
        let body: JSONValue = .object([
            "distinct_ids": .array(distinctIDs.prefix(Self.maxIDs).map(JSONValue.string)),
            "compliance_type": .string("GDPR"),
        ])
        var request = HTTPClientRequest(url: base + "?" + tokenQuery)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: body.compactUTF8))
        let (status, answer) = try await send(request)
        guard (200..<300).contains(status) else { return refusal(status) }
        // The OpenAPI document says `results.task_id`; its prose example, `results[].tracking_id`.
        let results = answer?["results"]
        var task: String?
        if case .string(let id)? = results?["task_id"] { task = id }
        if case .array(let items)? = results, case .string(let id)? = items.first?["tracking_id"] { task = id }
        guard let task, !task.isEmpty else {
            return .retry(reason: "Mixpanel answered \(status) to the deletion without a task id")
        }
        return .inProgress(note: Self.notePrefix + task, checkAfter: options.gdprCheckEvery)
    }

    /// Reads the task's status: done on `SUCCESS`, failed on `FAILURE`, `REVOKED` or
    /// `NOT_FOUND`, else in progress still.
    func status(of task: String) async throws -> ForgetOutcome {
        let id = task.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(["-", "_"])) ?? task
        var request = HTTPClientRequest(url: base + id + "?" + tokenQuery)
        request.method = .GET
        let (status, answer) = try await send(request)
        guard (200..<300).contains(status) else { return refusal(status) }
        guard case .string(let state)? = answer?["results"]?["status"] else {
            return .retry(reason: "Mixpanel answered \(status) to the deletion's status without one")
        }
        switch state.uppercased() {
        case "SUCCESS": return .done
        case "FAILURE", "REVOKED", "NOT_FOUND": return .failed(reason: "Mixpanel's deletion task \(task) is \(state)")
        default: return .inProgress(note: Self.notePrefix + task, checkAfter: options.gdprCheckEvery)
        }
    }

    private func refusal(_ status: Int) -> ForgetOutcome {
        switch status {
        case 429, 500...599: .retry(reason: "Mixpanel's GDPR API answered \(status)")
        // A token expired (they last a year) or without the right is the configuration's to mend.
        case 401, 403: .retry(reason: "Mixpanel's GDPR API answered \(status): check gdpr_token", after: .zero)
        default: .failed(reason: "Mixpanel's GDPR API answered \(status)")
        }
    }

    private func send(_ request: HTTPClientRequest) async throws -> (Int, JSONValue?) {
        var request = request
        request.headers.add(name: "Authorization", value: "Bearer \(options.gdprToken ?? "")")
        request.headers.add(name: "Accept", value: "application/json")
        do {
            let exchange = try await client.exchange(request, timeout: options.timeout, bodyLimit: 1 << 20)
            let body = try? exchange.body.get()
            return (Int(exchange.response.status.code), body.flatMap { try? JSONValue.parse(Data(buffer: $0)) })
        } catch {
            throw MixpanelSink.Unavailable(description: "Mixpanel unreachable: \(OutboundFailure.describe(error))")
        }
    }
}
