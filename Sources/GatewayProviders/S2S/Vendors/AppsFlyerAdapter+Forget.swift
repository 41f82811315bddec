import Foundation
import GatewayCore

/// AppsFlyer's OpenDSR API: one erasure request per forget request, naming every id the
/// gateway holds of the user (`POST /api/gdpr/v1/opendsr_requests`, a V2 API token).
extension AppsFlyerAdapter {
    public func forgetRequests(for request: ForgetRequest) -> VendorForget {
        guard let token = settings.gdprToken else {
            return .notSupported(
                "set providers.s2s.vendors.appsflyer.gdpr_api_token (a V2 API token) to ask AppsFlyer to erase users")
        }
        let digits = request.appID.hasPrefix("id") ? String(request.appID.dropFirst(2)) : request.appID
        guard digits.isASCIIDigits else {
            return .notSupported("app id \(request.appID.prefix(40)) is not an App Store id, as AppsFlyer names apps")
        }
        let ids = request.identifiers
        let identities: [(String, String)] =
            (ids.vendorIDs["appsflyer_id"] ?? []).map { ("appsflyer_id", $0) } + ids.idfvs.map { ("idfv", $0) }
            + ids.idfas.map { ("ios_advertising_id", $0) } + ids.appUserIDs.map { ("customer_user_id", $0) }
        guard !identities.isEmpty else { return .requests([]) }
        // The forget request's own id, so that a retry of a request AppsFlyer took is its
        // duplicate (e213), not a second erasure.
        let body: JSONValue = .object([
            "subject_request_id": .string(request.requestID), "subject_request_type": .string("erasure"),
            "submitted_time": .string(ISO8601.format(request.requestedAt)), "api_version": .string("0.1"),
            "property_id": .string("id" + digits), "platform": .string("ios"),
            "subject_identities": .array(
                identities.map { type, value in
                    .object([
                        "identity_type": .string(type), "identity_value": .string(value),
                        "identity_format": .string("raw"),
                    ])
                }),
        ])
        return .requests([
            VendorRequest(
                method: .post, url: "\(settings.gdprBase)/api/gdpr/v1/opendsr_requests",
                headers: [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")],
                body: Data(body.compactUTF8))
        ])
    }

    public func forgetOutcome(status: Int, body: String, retryAfter: Duration?) -> ForgetOutcome {
        guard status == 400 else { return defaultForgetOutcome(status: status, body: body, retryAfter: retryAfter) }
        // e213: this request was taken already; e215: another open request erases the same ids.
        if body.contains("e213") || body.contains("e215") { return .done }
        // e511: AppsFlyer asks for an hour's wait.
        if body.contains("e511") {
            return .retry(reason: "AppsFlyer asked to retry in an hour (e511)", after: .seconds(3600))
        }
        return .failed(reason: "AppsFlyer answered 400: \(body.prefix(200))")
    }
}
