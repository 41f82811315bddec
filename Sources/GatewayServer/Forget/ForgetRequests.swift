import Foundation
import GatewayConfig
import GatewayCore
import Logging

/// Forget requests as the route and the `forget` command take them: checked, forgotten in
/// the store, queued for every sink the configuration names, and told to their workers.
public struct ForgetRequests: Sendable {
    let store: any ForgetStore
    /// The sinks a request is queued for: those of the configuration as it stands.
    let sinks: @Sendable () -> [String]
    let wake: @Sendable (String) -> Void
    let metrics: GatewayMetrics
    let logger: Logger

    public init(
        store: any ForgetStore, sinks: @escaping @Sendable () -> [String], metrics: GatewayMetrics = .none,
        logger: Logger,
        wake: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.store = store
        self.sinks = sinks
        self.wake = wake
        self.metrics = metrics
        self.logger = logger
    }

    /// The subject of a request body: `app_id` and one or more of `app_user_id`, `idfv`, `idfa`.
    public static func subject(_ fields: PayloadFields) throws -> ForgetSubject {
        let known: Set<String> = ["app_id", "app_user_id", "idfv", "idfa"]
        if let unknown = fields.object.keys.sorted().first(where: { !known.contains($0) }) {
            throw GatewayError.invalid(
                unknown, "not a field of a forget request; it takes app_id, and app_user_id, idfv or idfa")
        }
        if let named = try fields.string("app_user_id"), !UserIDs.isReal(named) {
            // Forgetting `anonymous` would forget everyone who ever sent it.
            throw GatewayError.invalid("app_user_id", "a blank or placeholder id (such as anonymous) names no user")
        }
        let subject = ForgetSubject(
            appID: try fields.requiredString("app_id"), appUserID: try fields.string("app_user_id"),
            idfv: try device("idfv", fields), idfa: try device("idfa", fields))
        try check(subject)
        return subject
    }

    /// Refuses a subject that names nobody.
    public static func check(_ subject: ForgetSubject) throws {
        guard subject.appUserID != nil || subject.idfv != nil || subject.idfa != nil else {
            throw GatewayError(
                .missingField, "name the user: app_user_id, or the device's idfv or idfa", field: "app_user_id")
        }
    }

    private static func device(_ key: String, _ fields: PayloadFields) throws -> String? {
        guard let text = try fields.string(key) else { return nil }
        guard let uuid = UUID(uuidString: text) else { throw GatewayError.invalid(key, "expected a UUID") }
        // The all-zero id is every device without consent: forgetting it would forget them all.
        guard uuid.uuidString != AttributionRecord.unsetDeviceID else {
            throw GatewayError.invalid(key, "the all-zero id names no device")
        }
        return uuid.uuidString
    }

    /// Forgets the user in the store and queues the request for every sink.
    public func submit(_ subject: ForgetSubject) async throws -> ForgetStatus {
        let requestID = UUID().uuidString.lowercased()
        let digest = SHA256Hex.digest(subject.namedID).map { String(format: "%02x", $0) }.joined()
        let sinks = self.sinks()
        let status = try await store.forget(
            subject, requestID: requestID, userDigest: digest, sinks: sinks, now: Date())
        for sink in sinks { wake(sink) }
        metrics.forgetRequested()
        // The request id and the digest, never the id named.
        logger.info(
            "forget request accepted",
            metadata: [
                "request_id": "\(requestID)", "app_id": "\(subject.appID)",
                "records_forgotten": "\(status.recordsForgotten)", "sinks": "\(sinks.count)",
            ])
        return status
    }

    public func status(_ requestID: String) async throws -> ForgetStatus? {
        try await store.forgetStatus(id: requestID)
    }
}

extension ForgetStatus {
    /// The status as the route answers it and `forget status --format json` prints it.
    public var json: JSONValue {
        var sinks: [String: JSONValue] = [:]
        for sink in self.sinks {
            sinks[sink.sink] = jsonObject([
                ("status", .string(sink.state.rawValue)), ("reason", sink.reason.map(JSONValue.string)),
            ])
        }
        return jsonObject([
            ("request_id", .string(requestID)), ("app_id", .string(appID)), ("status", .string(overall.rawValue)),
            ("user_sha256", .string(userDigest)), ("requested_at", .string(ISO8601.format(requestedAt))),
            ("completed_at", completedAt.map { .string(ISO8601.format($0)) }),
            ("records_forgotten", .integer(Int64(recordsForgotten))), ("sinks", .object(sinks)),
        ])
    }
}
