import Foundation
import Hummingbird
import Synchronization

/// Local stand-ins for AppsFlyer's OpenDSR API, Adjust's data erasure API and Singular's
/// GDPR API, checking a request as each documents it and answering as each does:
/// AppsFlyer `201`, or `400` with `af_gdpr_code` `e213` for a request id it has seen;
/// Adjust `200`, or `400` for a wrong app token or not exactly one device id; Singular
/// `201` to an OpenGDPR 0.1.4 request with the id types its discovery document lists.
final class FakeVendorDeletions: Sendable {
    static let appsFlyerToken = "appsflyer-v2-api-token-0001"
    static let singularKey = "singular-reporting-api-key-0001"

    struct Seen: Sendable {
        var vendor: String
        var query: [String: String]
        var body: [String: Any]? { try? JSONSerialization.jsonObject(with: bodyData) as? [String: Any] }
        var bodyData: Data
        var authorization: String?
    }

    private let seen = Mutex<[Seen]>([])
    private let refusals = Mutex<[String]>([])
    var accepted: [Seen] { seen.withLock { $0 } }
    func accepted(_ vendor: String) -> [Seen] { accepted.filter { $0.vendor == vendor } }
    var refused: [String] { refusals.withLock { $0 } }

    func router(adjustAppToken: String) -> Router<BasicRequestContext> {
        let router = Router()
        router.post("/api/gdpr/v1/opendsr_requests") { request, _ -> Response in
            let data = Data(try await request.body.collect(upTo: 1 << 20).readableBytesView)
            guard request.headers[.authorization] == "Bearer \(Self.appsFlyerToken)" else {
                return self.refuse("appsflyer: authorization", status: .unauthorized)
            }
            guard let body = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                let id = body["subject_request_id"] as? String, UUID(uuidString: id) != nil, id == id.lowercased(),
                body["subject_request_type"] as? String == "erasure",
                (body["submitted_time"] as? String).map({
                    ISO8601DateFormatter().date(from: $0) != nil
                        || $0.contains("T")
                }) == true,
                (body["property_id"] as? String)?.hasPrefix("id") == true, body["platform"] as? String == "ios",
                let identities = body["subject_identities"] as? [[String: Any]], !identities.isEmpty,
                identities.allSatisfy({ identity in
                    [
                        "ios_advertising_id", "appsflyer_id", "customer_user_id", "idfv",
                    ].contains(identity["identity_type"] as? String ?? "")
                        && identity["identity_format"] as? String == "raw"
                        && !(identity["identity_value"] as? String ?? "").isEmpty
                })
            else { return self.refuse("appsflyer: body", status: .badRequest) }
            let duplicate = self.accepted("appsflyer").contains { $0.body?["subject_request_id"] as? String == id }
            if duplicate {
                return Self.json(
                    #"{"error":{"code":400,"message":"duplicate subject_request_id","af_gdpr_code":"e213"}}"#,
                    status: .badRequest)
            }
            self.seen.withLock {
                $0.append(
                    Seen(
                        vendor: "appsflyer", query: [:], bodyData: data, authorization: request.headers[.authorization])
                )
            }
            return Self.json(
                #"{"subject_request_id":"\#(id)","received_time":"2026-11-28T10:00:00Z","expected_completion_time":"2026-12-28T10:00:00Z"}"#,
                status: .created)
        }
        router.post("/api/gdpr/requests") { request, _ -> Response in
            let data = Data(try await request.body.collect(upTo: 1 << 20).readableBytesView)
            guard request.headers[.authorization] == Self.singularKey else {
                return self.refuse("singular: authorization", status: .unauthorized)
            }
            guard let body = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                let id = body["subject_request_id"] as? String, UUID(uuidString: id) != nil,
                body["subject_request_type"] as? String == "erasure", body["api_version"] as? String == "0.1.4",
                body["submitted_time"] is String,
                let identities = body["subject_identities"] as? [[String: Any]], !identities.isEmpty,
                identities.allSatisfy({ identity in
                    ["ios_advertising_id", "ios_vendor_id", "user_id"].contains(
                        identity["identity_type"] as? String ?? "")
                        && identity["identity_format"] as? String == "raw"
                })
            else { return self.refuse("singular: body", status: .badRequest) }
            self.seen.withLock {
                $0.append(
                    Seen(vendor: "singular", query: [:], bodyData: data, authorization: request.headers[.authorization])
                )
            }
            return Self.json(
                #"{"controller_id":"gateway","subject_request_id":"\#(id)","received_time":"2026-11-28T10:00:00Z","expected_completion_time":"2026-12-28T10:00:00Z"}"#,
                status: .created)
        }
        router.post("/gdpr_forget_device") { request, _ -> Response in
            var query: [String: String] = [:]
            for (key, value) in request.uri.queryParameters { query[String(key)] = String(value) }
            let devices = ["idfa", "idfv", "gps_adid", "fire_adid", "win_adid", "adid"].filter { query[$0] != nil }
            guard query["s2s"] == "1", query["app_token"] == adjustAppToken, devices.count == 1 else {
                return self.refuse("adjust: \(query.keys.sorted())", status: .badRequest)
            }
            self.seen.withLock {
                $0.append(
                    Seen(
                        vendor: "adjust", query: query, bodyData: Data(), authorization: request.headers[.authorization]
                    ))
            }
            return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "OK")))
        }
        return router
    }

    private func refuse(_ what: String, status: HTTPResponse.Status) -> Response {
        refusals.withLock { $0.append(what) }
        return Response(status: status)
    }

    static func json(_ text: String, status: HTTPResponse.Status) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}
