import AsyncHTTPClient
import Foundation
import NIOCore

/// Names of Apple Ads entities by id; nil when Apple says the id does not exist (404).
protocol AppleAdsNameSource: Sendable {
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

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The JSON object answered, or nil for 404.
    func get(_ path: String, context: String?) async throws -> [String: Any]? {
        var backoff = initialBackoff
        var refreshed = false
        for _ in 0..<maxAttempts {
            let token = try await tokens.accessToken()
            var request = HTTPClientRequest(url: base + path)
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            request.headers.add(name: "Accept", value: "application/json")
            if let context { request.headers.add(name: "X-AP-Context", value: context) }
            let response = try await client.execute(request, timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 4 << 20)
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
                let retryAfter = response.headers.first(name: "Retry-After").flatMap(Int.init).map { Duration.seconds($0) }
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
