import AsyncHTTPClient
import Foundation
import GatewayCore
import NIOCore

/// Names of Apple Ads entities by id; nil when Apple says the id does not exist (404).
protocol AppleAdsNameSource: Sendable {
    /// Many keywords in one request, by id; nil when the API has no bulk query.
    func keywords(ids: [Int64], orgID: Int64?) async throws -> [Int64: (text: String, matchType: String?)]?
    func keyword(id: Int64, adGroupID: Int64?, campaignID: Int64?, orgID: Int64?) async throws -> (text: String, matchType: String?)?
    func adGroupName(id: Int64, campaignID: Int64?, orgID: Int64?) async throws -> String?
    func campaignName(id: Int64, orgID: Int64?) async throws -> String?
}

/// Authenticated GETs with Apple's retry rules: `429` waits for `Retry-After` (or 2, 4, 8,
/// 16 s, then 16 s), a `401` fetches a new token once, `404` means unknown.
struct AppleAdsHTTP: Sendable {
    let base: String
    let tokens: AppleAdsTokenSource
    let client: HTTPClient
    let maxAttempts = 6
    /// Apple asks for 2, 4, 8, 16 s, then 16 s.
    var initialBackoff: Duration = .seconds(2)
    /// Waits between attempts; tests make it instant.
    let sleep: @Sendable (Duration) async throws -> Void
    /// Apple's `RateLimit-Remaining: 0` with `RateLimit-Reset: N` pauses every request for
    /// N seconds, before a 429 has to say so.
    let gate = RateGate()

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The JSON object answered, or nil for 404.
    func get(_ path: String, context: String?) async throws -> [String: Any]? {
        try await send(path, body: nil, context: context)
    }

    /// A POST of a JSON body (bulk queries), with the same rules as ``get(_:context:)``.
    func post(_ path: String, json: Data, context: String?) async throws -> [String: Any]? {
        try await send(path, body: json, context: context)
    }

    private func send(_ path: String, body: Data?, context: String?) async throws -> [String: Any]? {
        var backoff = initialBackoff
        var refreshed = false
        for _ in 0..<maxAttempts {
            if let pause = await gate.pause() { try await sleep(pause) }
            let token = try await tokens.accessToken()
            var request = HTTPClientRequest(url: base + path)
            if let body {
                request.method = .POST
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(bytes: body))
            }
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            request.headers.add(name: "Accept", value: "application/json")
            if let context { request.headers.add(name: "X-AP-Context", value: context) }
            let exchange = try await client.exchange(request, timeout: .seconds(30), bodyLimit: 4 << 20)
            let response = exchange.response
            let body = try exchange.body.get()
            await gate.note(
                remaining: response.headers.first(name: "RateLimit-Remaining").flatMap(Int.init),
                reset: response.headers.first(name: "RateLimit-Reset").flatMap(Int.init))
            switch response.status.code {
            case 200:
                guard let json = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
                else { throw Failure(description: "\(path): not a JSON object") }
                return json
            case 404:
                return nil
            case 401 where !refreshed:
                refreshed = true
                await tokens.invalidate(token)
            case 429, 500...599:
                let retryAfter = response.headers.first(name: "Retry-After").flatMap { RetryAfter.parse($0) }
                try await sleep(max(retryAfter ?? backoff, .zero))
                backoff = min(backoff * 2, initialBackoff * 8)
            default:
                throw Failure(description: "\(path): Apple Ads answered \(response.status.code)")
            }
        }
        throw Failure(description: "\(path): gave up after \(maxAttempts) attempts")
    }
}

/// The Apple Ads Platform API v1: `X-AP-Context: adAccountId=…` (found for the AdServices
/// `orgId` through `GET /v1/acls`), the `result` envelope, entities by id.
actor AppleAdsPlatformV1: AppleAdsNameSource {
    let http: AppleAdsHTTP
    /// Ad account ids by org id, read once (concurrent lookups share the request).
    private var accounts: Task<[Int64: [Int64]], Error>?

    init(http: AppleAdsHTTP) {
        self.http = http
    }

    /// The ad accounts of an org, or every account the credentials see when it is unknown.
    func adAccounts(orgID: Int64?) async throws -> [Int64] {
        if accounts == nil {
            let http = self.http
            accounts = Task {
                let json = try await http.get("/acls", context: nil)
                let result = json?["result"] as? [String: Any]
                var byOrg: [Int64: [Int64]] = [:]
                for acl in result?["acls"] as? [[String: Any]] ?? [] {
                    guard let account = acl["adAccount"] as? [String: Any], let id = Self.int(account["id"]) else {
                        continue
                    }
                    let org = Self.int(account["orgId"]) ?? 0
                    if !(byOrg[org] ?? []).contains(id) { byOrg[org, default: []].append(id) }
                }
                return byOrg
            }
        }
        let byOrg: [Int64: [Int64]]
        do {
            byOrg = try await accounts!.value
        } catch {
            accounts = nil  // asked again next time
            throw error
        }
        if let orgID, let mine = byOrg[orgID] { return mine }
        return byOrg.values.flatMap { $0 }
    }

    /// The `result` object of the first ad account that knows the entity.
    func entity(_ path: String, orgID: Int64?) async throws -> [String: Any]? {
        for account in try await adAccounts(orgID: orgID) {
            if let json = try await http.get(path, context: "adAccountId=\(account)"),
                let result = json["result"] as? [String: Any]
            {
                return result
            }
        }
        return nil
    }

    /// `POST /v1/keywords/query` filtered by `id IN (…)`, a thousand ids a request.
    func keywords(ids: [Int64], orgID: Int64?) async throws -> [Int64: (text: String, matchType: String?)]? {
        var found: [Int64: (text: String, matchType: String?)] = [:]
        for account in try await adAccounts(orgID: orgID) {
            let wanted = ids.filter { found[$0] == nil }
            for start in stride(from: 0, to: wanted.count, by: 1000) {
                let chunk = Array(wanted[start..<min(start + 1000, wanted.count)])
                let query: [String: Any] = [
                    "filters": [["field": "id", "operator": "IN", "value": chunk]],
                    "pagination": ["offset": 0, "pageSize": chunk.count],
                ]
                let json = try await http.post(
                    "/keywords/query", json: try JSONSerialization.data(withJSONObject: query),
                    context: "adAccountId=\(account)")
                for keyword in json?["result"] as? [[String: Any]] ?? [] {
                    guard let id = Self.int(keyword["id"]), let text = keyword["text"] as? String else { continue }
                    found[id] = (text, keyword["matchType"] as? String)
                }
            }
        }
        return found
    }

    func keyword(id: Int64, adGroupID: Int64?, campaignID: Int64?, orgID: Int64?) async throws -> (text: String, matchType: String?)? {
        guard let result = try await entity("/keywords/\(id)", orgID: orgID), let text = result["text"] as? String else {
            return nil
        }
        return (text, result["matchType"] as? String)
    }

    func adGroupName(id: Int64, campaignID: Int64?, orgID: Int64?) async throws -> String? {
        try await entity("/adgroups/\(id)", orgID: orgID)?["name"] as? String
    }

    func campaignName(id: Int64, orgID: Int64?) async throws -> String? {
        try await entity("/campaigns/\(id)", orgID: orgID)?["name"] as? String
    }

    static func int(_ value: Any?) -> Int64? {
        if let number = value as? NSNumber { return number.int64Value }
        if let text = value as? String { return Int64(text) }
        return nil
    }
}

/// The Campaign Management API v5 (until its sunset on 2027-01-26):
/// `X-AP-Context: orgId=…`, the `data` envelope, keywords under their ad group.
struct AppleAdsCampaignManagementV5: AppleAdsNameSource {
    let http: AppleAdsHTTP

    /// v5's bulk find is per campaign; lookups go one by one.
    func keywords(ids: [Int64], orgID: Int64?) async throws -> [Int64: (text: String, matchType: String?)]? { nil }

    func keyword(id: Int64, adGroupID: Int64?, campaignID: Int64?, orgID: Int64?) async throws -> (text: String, matchType: String?)? {
        guard let adGroupID, let campaignID, let orgID else { return nil }
        let json = try await http.get(
            "/campaigns/\(campaignID)/adgroups/\(adGroupID)/targetingkeywords/\(id)", context: "orgId=\(orgID)")
        guard let data = json?["data"] as? [String: Any], let text = data["text"] as? String else { return nil }
        return (text, data["matchType"] as? String)
    }

    func adGroupName(id: Int64, campaignID: Int64?, orgID: Int64?) async throws -> String? {
        guard let campaignID, let orgID else { return nil }
        let json = try await http.get("/campaigns/\(campaignID)/adgroups/\(id)", context: "orgId=\(orgID)")
        return (json?["data"] as? [String: Any])?["name"] as? String
    }

    func campaignName(id: Int64, orgID: Int64?) async throws -> String? {
        guard let orgID else { return nil }
        let json = try await http.get("/campaigns/\(id)", context: "orgId=\(orgID)")
        return (json?["data"] as? [String: Any])?["name"] as? String
    }
}

/// The pause Apple's rate-limit headers ask for, shared by every request of one client.
actor RateGate {
    private var until: ContinuousClock.Instant?

    /// How long to wait before the next request, if at all.
    func pause() -> Duration? {
        guard let until else { return nil }
        let now = ContinuousClock.now
        guard until > now else {
            self.until = nil
            return nil
        }
        return until - now
    }

    func note(remaining: Int?, reset: Int?) {
        guard remaining == 0, let reset, reset > 0 else { return }
        until = ContinuousClock.now.advanced(by: .seconds(min(reset, 60)))
    }
}
