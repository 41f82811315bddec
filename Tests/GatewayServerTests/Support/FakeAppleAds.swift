import Crypto
import Foundation
import Hummingbird
import Synchronization

/// Apple's OAuth token endpoint and the Apple Ads Platform API v1, on loopback. The token
/// endpoint checks the client secret as Apple would: an ES256 JWT with the right `kid`,
/// claims and lifetime, signed by the team's key. The API checks the bearer token and the
/// `X-AP-Context` header and answers in the `result` envelope.
final class FakeAppleAds: Sendable {
    static let clientID = "SEARCHADS.client-0001"
    static let teamID = "SEARCHADS.team-0001"
    static let keyID = "key-0001"
    static let orgID: Int64 = 40_669_820
    static let adAccountID: Int64 = 9001

    let publicKey: P256.Signing.PublicKey
    private let issued = Mutex<[String]>([])
    private let revoked = Mutex<Set<String>>([])
    private let counts = Mutex<[String: Int]>([:])
    let down = Mutex(false)
    /// Held before answering keyword, ad group and campaign requests.
    let delay = Mutex(Duration.zero)
    /// Sent as `RateLimit-Remaining` (with `RateLimit-Reset: 3`) when set.
    let remaining = Mutex<Int?>(nil)
    /// Entities answered `200` without the entity (`{"result":null}`), as a proxy or a
    /// half-broken Apple might.
    let malformed = Mutex(false)
    /// `GET /acls` answers no account.
    let noAccounts = Mutex(false)
    /// `GET /acls` lists a second account of the org, ``otherAccountID``, whose reports
    /// hold none of the campaigns.
    let otherAccount = Mutex(false)
    static let otherAccountID: Int64 = 777
    /// Every token is refused with `401` (a revoked key or role).
    let refuseTokens = Mutex(false)
    /// The token endpoint refuses the client (`400 invalid_client`), as for a revoked key.
    let refuseClient = Mutex(false)
    /// Times the token endpoint refused the client.
    let clientRefusals = Mutex(0)
    /// `/keywords/query` answers `400`, as for a filter Apple no longer takes.
    let queryRefused = Mutex(false)
    /// Entity GETs being answered now, and the most there were at once.
    let inFlight = Mutex((now: 0, most: 0))
    /// The most keywords one `/keywords/query` page answers, as Apple may answer fewer
    /// than asked; nil answers every one asked.
    let queryPage = Mutex<Int?>(nil)
    /// The token endpoint answers `400` with another OAuth error than `invalid_client`.
    let badTokenRequest = Mutex<String?>(nil)
    /// The token endpoint answers `503`, counting each request in `tokenFailures`.
    let tokenDown = Mutex(false)
    let tokenFailures = Mutex(0)
    /// The token endpoint takes requests and answers none while this is set.
    let tokenHangs = Mutex(false)
    /// The `expires_in` of the tokens issued.
    let tokenLifetime = Mutex(3600)
    /// When set, the JSON value (already encoded) answered as every v1 entity's name or text.
    let nameOverride = Mutex<String?>(nil)
    /// The next this many API requests get `429` with `Retry-After` (``retryAfter``).
    let tooMany = Mutex(0)
    /// The `Retry-After` of those answers, in seconds.
    let retryAfter = Mutex("7")
    /// Requests made to the API (not the token endpoint), by path.
    private let apiRequests = Mutex(0)
    /// Refusals a real Apple would give, with why.
    private let refusals = Mutex<[String]>([])

    /// Keyword reports, with the spend they answer.
    let reports = FakeAppleAdsReports()

    init(publicKey: P256.Signing.PublicKey) {
        self.publicKey = publicKey
    }

    var tokenRequests: Int { issued.withLock { $0.count } }
    var requests: Int { apiRequests.withLock { $0 } }
    var issuedTokens: [String] { issued.withLock { $0 } }
    func count(_ kind: String) -> Int { counts.withLock { $0[kind] ?? 0 } }
    var refused: [String] { refusals.withLock { $0 } }

    /// Every token issued so far stops working, as an expired one does.
    func expireTokens() {
        let all = issued.withLock { $0 }
        revoked.withLock { $0.formUnion(all) }
    }

    func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.post("/auth/oauth2/token") { request, _ -> Response in
            let body = String(buffer: try await request.body.collect(upTo: 64 * 1024))
            var form: [String: String] = [:]
            for pair in body.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? "" }
                if parts.count == 2 { form[parts[0]] = parts[1] }
            }
            // Until the test lets go: a request held for good would hold the server's stop.
            while self.tokenHangs.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(50)) }
            if self.tokenDown.withLock({ $0 }) {
                self.tokenFailures.withLock { $0 += 1 }
                return Self.json(503, #"{"error":"temporarily_unavailable"}"#)
            }
            if self.refuseClient.withLock({ $0 }) {
                self.clientRefusals.withLock { $0 += 1 }
                return Self.json(400, #"{"error":"invalid_client"}"#)
            }
            if let error = self.badTokenRequest.withLock({ $0 }) {
                self.tokenFailures.withLock { $0 += 1 }
                return Self.json(400, #"{"error":"\#(error)"}"#)
            }
            if let problem = self.checkTokenRequest(request, form) {
                self.refusals.withLock { $0.append(problem) }
                return Self.json(400, #"{"error":"invalid_client"}"#)
            }
            let token = "access-\(UUID().uuidString)"
            self.issued.withLock { $0.append(token) }
            let lifetime = self.tokenLifetime.withLock { $0 }
            return Self.json(
                200,
                #"{"access_token":"\#(token)","token_type":"Bearer","expires_in":\#(lifetime),"scope":"searchadsorg"}"#)
        }
        router.get("/v1/acls") { request, _ -> Response in
            if let refusal = self.refuse(request, context: false) { return refusal }
            self.counts.withLock { $0["acls", default: 0] += 1 }
            if self.noAccounts.withLock({ $0 }) { return Self.json(200, #"{"result":{"acls":[]}}"#) }
            // The other account first, as an org's accounts come in no set order.
            let other =
                self.otherAccount.withLock { $0 }
                ? #"{"adAccount":{"id":\#(Self.otherAccountID),"name":"Other","orgId":\#(Self.orgID)},"roles":["API Account Read Only"]},"#
                : ""
            return Self.json(
                200,
                #"{"result":{"acls":[\#(other){"adAccount":{"id":\#(Self.adAccountID),"name":"Main","orgId":\#(Self.orgID)},"roles":["API Account Read Only"]}]}}"#
            )
        }
        for (path, kind) in [
            ("/v1/keywords/:id", "keyword"), ("/v1/adgroups/:id", "adgroup"), ("/v1/campaigns/:id", "campaign"),
        ] {
            router.get(RouterPath(path)) { request, context -> Response in
                if let refusal = self.refuse(request, context: true) { return refusal }
                let id = context.parameters.get("id") ?? ""
                self.counts.withLock { $0[kind, default: 0] += 1 }
                self.inFlight.withLock { $0 = ($0.now + 1, max($0.most, $0.now + 1)) }
                defer { self.inFlight.withLock { $0.now -= 1 } }
                let delay = self.delay.withLock { $0 }
                if delay > .zero { try await Task.sleep(for: delay) }
                guard id != "404404" else {
                    return Self.json(404, #"{"error":{"code":"not_found","message":"not found","details":[]}}"#)
                }
                guard id != "403403" else {
                    return Self.json(403, #"{"error":{"code":"forbidden","message":"not yours","details":[]}}"#)
                }
                if self.malformed.withLock({ $0 }) { return Self.json(200, #"{"result":null}"#) }
                let name = self.nameOverride.withLock { $0 } ?? #""\#(kind) \#(id)""#
                let body =
                    kind == "keyword"
                    ? #"{"id":\#(id),"text":\#(name),"matchType":"EXACT","adAccountId":\#(Self.adAccountID),"deleted":false}"#
                    : #"{"id":\#(id),"name":\#(name),"deleted":false}"#
                var response = Self.json(200, #"{"result":\#(body)}"#)
                if let remaining = self.remaining.withLock({ $0 }) {
                    response.headers[HTTPFields.Element.Name("RateLimit-Remaining")!] = String(remaining)
                    response.headers[HTTPFields.Element.Name("RateLimit-Reset")!] = "3"
                }
                return response
            }
        }
        // Bulk keywords: only by id (the API wants an ad group or campaign filter otherwise).
        router.post("/v1/keywords/query") { request, _ -> Response in
            if let refusal = self.refuse(request, context: true) { return refusal }
            if self.queryRefused.withLock({ $0 }) {
                return Self.json(400, #"{"error":{"code":"bad_request","message":"filters","details":[]}}"#)
            }
            let body = try await request.body.collect(upTo: 1 << 20)
            guard let query = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any],
                let filters = query["filters"] as? [[String: Any]], let filter = filters.first,
                filter["field"] as? String == "id", filter["operator"] as? String == "IN",
                let ids = filter["value"] as? [Int], ids.count <= 1000,
                let offset = (query["pagination"] as? [String: Any])?["offset"] as? Int
            else {
                self.refusals.withLock { $0.append("keywords/query without an id IN filter") }
                return Self.json(400, #"{"error":{"code":"bad_request","message":"filters","details":[]}}"#)
            }
            self.counts.withLock { $0["keyword-query", default: 0] += 1 }
            let found = ids.filter { $0 != 404_404 }.map {
                #"{"id":\#($0),"text":"keyword \#($0)","matchType":"EXACT","deleted":false}"#
            }
            let page = found.dropFirst(offset).prefix(self.queryPage.withLock { $0 } ?? found.count)
            return Self.json(
                200,
                #"{"result":[\#(page.joined(separator: ","))],"pagination":{"offset":\#(offset),"pageSize":\#(page.count),"totalCount":\#(found.count)}}"#
            )
        }
        // The Campaign Management API v5: orgId context, `data` envelope.
        let v5 = [
            ("/api/v5/campaigns/:campaign/adgroups/:adgroup/targetingkeywords/:keyword", "v5-keyword", "keyword"),
            ("/api/v5/campaigns/:campaign/adgroups/:adgroup", "v5-adgroup", "adgroup"),
            ("/api/v5/campaigns/:campaign", "v5-campaign", "campaign"),
        ]
        for (path, kind, parameter) in v5 {
            router.get(RouterPath(path)) { request, context -> Response in
                if let refusal = self.refuse(request, context: true, expected: "orgId=\(Self.orgID)") { return refusal }
                let id = context.parameters.get(parameter) ?? ""
                self.counts.withLock { $0[kind, default: 0] += 1 }
                let body =
                    kind == "v5-keyword"
                    ? #"{"id":\#(id),"text":"v5 keyword \#(id)","matchType":"BROAD","deleted":false}"#
                    : #"{"id":\#(id),"name":"v5 \#(kind.dropFirst(3)) \#(id)"}"#
                return Self.json(200, #"{"data":\#(body),"pagination":null,"error":null}"#)
            }
        }
        reports.add(self, to: router)
        return router
    }

    /// Why Apple would refuse an API request (down, throttled, a bad token or context), as
    /// its answer; nil when it would answer.
    func refusal(_ request: Request, context: Bool, expected: String = "adAccountId=\(adAccountID)") -> Response? {
        refuse(request, context: context, expected: expected)
    }

    /// Notes a request the real API would refuse.
    func refuse(_ why: String) {
        refusals.withLock { $0.append(why) }
    }

    private func refuse(_ request: Request, context: Bool, expected: String = "adAccountId=\(adAccountID)") -> Response?
    {
        apiRequests.withLock { $0 += 1 }
        if down.withLock({ $0 }) { return Response(status: .serviceUnavailable) }
        let throttled = tooMany.withLock { count -> Bool in
            guard count > 0 else { return false }
            count -= 1
            return true
        }
        if throttled {
            var response = Self.json(429, #"{"error":{"code":"rate_limit","message":"too many","details":[]}}"#)
            response.headers[HTTPFields.Element.Name("Retry-After")!] = retryAfter.withLock { $0 }
            return response
        }
        if refuseTokens.withLock({ $0 }) {
            return Self.json(401, #"{"error":{"code":"unauthorized","message":"revoked","details":[]}}"#)
        }
        let authorization = request.headers[.authorization] ?? ""
        let token = String(authorization.dropFirst("Bearer ".count))
        guard authorization.hasPrefix("Bearer "), issued.withLock({ $0.contains(token) }),
            !revoked.withLock({ $0.contains(token) })
        else {
            return Self.json(401, #"{"error":{"code":"unauthorized","message":"invalid token","details":[]}}"#)
        }
        if context {
            let header = request.headers.first { $0.name.canonicalName == "x-ap-context" }?.value
            guard header == expected else {
                refusals.withLock { $0.append("X-AP-Context was \(header ?? "missing")") }
                return Self.json(403, #"{"error":{"code":"forbidden","message":"context","details":[]}}"#)
            }
        }
        return nil
    }

    /// Why Apple would refuse this token request, or nil.
    private func checkTokenRequest(_ request: Request, _ form: [String: String]) -> String? {
        guard request.headers[.contentType] == "application/x-www-form-urlencoded" else { return "content type" }
        guard form["grant_type"] == "client_credentials", form["scope"] == "searchadsorg" else {
            return "grant or scope"
        }
        guard form["client_id"] == Self.clientID, let jwt = form["client_secret"] else { return "client id" }
        let parts = jwt.split(separator: ".").map(String.init)
        guard parts.count == 3, let headerData = Self.base64URL(parts[0]), let claimsData = Self.base64URL(parts[1]),
            let signatureData = Self.base64URL(parts[2]),
            let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any],
            let claims = try? JSONSerialization.jsonObject(with: claimsData) as? [String: Any]
        else { return "not a JWT" }
        guard header["alg"] as? String == "ES256", header["kid"] as? String == Self.keyID else { return "header" }
        guard claims["sub"] as? String == Self.clientID, claims["iss"] as? String == Self.teamID,
            claims["aud"] as? String == "https://appleid.apple.com"
        else { return "claims" }
        let now = Int(Date().timeIntervalSince1970)
        guard let iat = claims["iat"] as? Int, let exp = claims["exp"] as? Int, iat <= now + 60, exp > now,
            exp - iat < 180 * 86_400
        else { return "lifetime" }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData),
            publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8))
        else { return "signature" }
        return nil
    }

    static func base64URL(_ text: String) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }

    static func json(_ status: Int, _ body: String) -> Response {
        Response(
            status: .init(code: status), headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}
