import Foundation
import GatewayCore

/// Adjust's data erasure API: `POST /gdpr_forget_device` with every parameter in the query,
/// once per device id the gateway holds of the user (Adjust forgets devices, not users).
extension AdjustAdapter {
    public func forgetRequests(for request: ForgetRequest) -> VendorForget {
        guard let app = settings.adjustApps[request.appID] else {
            return .notSupported(
                "no Adjust app token for app \(request.appID.prefix(40)) (providers.s2s.vendors.adjust.apps)")
        }
        let ids = request.identifiers
        let devices: [(String, String)] =
            ids.idfvs.map { ("idfv", $0) } + ids.idfas.map { ("idfa", $0) }
            + (ids.vendorIDs["adid"] ?? []).map { ("adid", $0) }
        let headers = settings.apiKey.map { [("Authorization", "Bearer \($0)")] } ?? []
        return .requests(
            devices.map { name, value in
                var query = URLComponents()
                query.queryItems = [
                    URLQueryItem(name: "s2s", value: "1"), URLQueryItem(name: "app_token", value: app.appToken),
                    URLQueryItem(name: name, value: value),
                ]
                return VendorRequest(
                    method: .post, url: "\(settings.gdprBase)/gdpr_forget_device?\(query.percentEncodedQuery ?? "")",
                    headers: headers)
            })
    }
}
