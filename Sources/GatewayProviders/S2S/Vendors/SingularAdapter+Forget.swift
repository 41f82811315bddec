import Foundation
import GatewayCore

/// Singular's GDPR API: one OpenGDPR (0.1.4, as its discovery document says) erasure request
/// per forget request, `POST /api/gdpr/requests`, its reporting API key as `Authorization`.
/// Singular documents the endpoints and the id types but not the body; this is the
/// OpenGDPR shape its discovery names.
extension SingularAdapter {
    public func forgetRequests(for request: ForgetRequest) -> VendorForget {
        guard let key = settings.gdprToken else {
            return .notSupported(
                "set providers.s2s.vendors.singular.gdpr_api_key (its reporting API key) to ask Singular to erase users"
            )
        }
        let ids = request.identifiers
        let identities: [(String, String)] =
            ids.idfvs.map { ("ios_vendor_id", $0) } + ids.idfas.map { ("ios_advertising_id", $0) }
            + ids.appUserIDs.map { ("user_id", $0) }
        guard !identities.isEmpty else { return .requests([]) }
        var body: [String: JSONValue] = [
            "subject_request_id": .string(request.requestID), "subject_request_type": .string("erasure"),
            "submitted_time": .string(ISO8601.format(request.requestedAt)), "api_version": .string("0.1.4"),
            "subject_identities": .array(
                identities.map { type, value in
                    .object([
                        "identity_type": .string(type), "identity_value": .string(value),
                        "identity_format": .string("raw"),
                    ])
                }),
        ]
        if let bundle = settings.singularBundles[request.appID] { body["property_id"] = .string("iOS:" + bundle) }
        return .requests([
            VendorRequest(
                method: .post, url: "\(settings.gdprBase)/api/gdpr/requests",
                headers: [("Authorization", key), ("Content-Type", "application/json")],
                body: Data(JSONValue.object(body).compactUTF8))
        ])
    }
}
