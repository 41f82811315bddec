import AsyncHTTPClient
import Foundation
import GatewayCore
import NIOCore

/// Names of Apple Ads entities by id; nil when Apple says the id does not exist (404) or
/// is not the credentials' to read (403). An answer without the name is an error.
protocol AppleAdsNameSource: Sendable {
    /// Many keywords in one request, by id; nil when the API has no bulk query.
    func keywords(ids: [Int64], orgID: Int64?) async throws -> [Int64: (text: String, matchType: String?)]?
    func keyword(id: Int64, adGroupID: Int64?, campaignID: Int64?, orgID: Int64?) async throws -> (
        text: String, matchType: String?
    )?
    func adGroupName(id: Int64, campaignID: Int64?, orgID: Int64?) async throws -> String?
    func campaignName(id: Int64, orgID: Int64?) async throws -> String?
    /// True when an entity is found only by its org (and campaign and ad group): v5.
    var asksByOrg: Bool { get }
    // Requirements, not only the extension's defaults: called on `any AppleAdsNameSource`,
    // a method the protocol does not declare is the extension's, whatever the source.
    func recoveries() async -> Int
    func untilRecovered(after recoveries: Int) async
    func onHold(_ handler: @escaping @Sendable () async -> Void) async
    func heldFor() async -> Duration?
}

extension AppleAdsNameSource {
    var asksByOrg: Bool { false }
    /// Has `handler` called whenever a request is about to wait out a pause Apple asked
    /// every request for (a `429`, `RateLimit-Remaining: 0`).
    func onHold(_ handler: @escaping @Sendable () async -> Void) async {}
    /// What is left of such a pause, if Apple asked for one.
    func heldFor() async -> Duration? { nil }
    /// How many outages have ended: a retry that failed during one and then waits knows
    /// by it whether the outage ended meanwhile.
    func recoveries() async -> Int { 0 }
    /// Returns when an outage ends after `recoveries` had ended (at once if one has);
    /// until cancelled when none does.
    func untilRecovered(after recoveries: Int) async {
        while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
    }
}

/// Authenticated GETs with Apple's retry rules: `429` waits for `Retry-After` (or 2, 4, 8,
/// 16 s, then 16 s), every request of the client with it; a `5xx` or no answer is the
/// caller's to retry, and until one request (a probe, after 2 s doubling to 15 s)
/// gets an answer again, every other is refused without being sent; a `401` fetches a new token
/// once, and a second refuses every request for a minute; `404` means unknown, `403`
/// not this account's.
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
        /// Refused without being sent, Apple Ads failing: when to ask again (the next probe).
        var retryIn: Duration? = nil
    }

    /// The JSON object answered, or nil for 404 and 403.
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
            if let pause = await gate.pause() {
                await gate.holdHandler?()
                try await sleep(pause)
            }
            if let left = await gate.refusedCredentials() {
                throw Failure(
                    description:
                        "\(path): Apple Ads refused the credentials; asking again in \(left.components.seconds) s"
                )
            }
            // Apple Ads failing: one request at a time finds out when it is back, not every
            // name's own retries.
            if let left = await gate.outageWait() {
                throw Failure(
                    description: "\(path): Apple Ads is failing; asking again in \(max(1, left.components.seconds)) s",
                    retryIn: left)
            }
            let token: String
            do {
                token = try await tokens.accessToken()
            } catch let failure as AppleAdsTokenSource.Failure where failure.refusedClient {
                // A revoked key is refused at the token endpoint, before any 401: without
                // the pause each name and each of its retries asked it again.
                await gate.refuseCredentials(for: .seconds(60))
                throw failure
            } catch {
                // Apple's token endpoint failing (a 5xx, no answer) is Apple Ads failing:
                // one probe at a time, as for the API, not every name's own retries.
                await gate.noteFailure(initial: initialBackoff)
                throw error
            }
            var request = HTTPClientRequest(url: base + path)
            if let body {
                request.method = .POST
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(bytes: body))
            }
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            request.headers.add(name: "Accept", value: "application/json")
            if let context { request.headers.add(name: "X-AP-Context", value: context) }
            let response: HTTPClientResponse
            let body: ByteBuffer
            do {
                let exchange = try await client.exchange(request, timeout: .seconds(30), bodyLimit: 4 << 20)
                response = exchange.response
                body = try exchange.body.get()
            } catch {
                await gate.noteFailure(initial: initialBackoff)
                throw error
            }
            if (500...599).contains(response.status.code) {
                await gate.noteFailure(initial: initialBackoff)
            } else {
                await gate.noteAnswer()
            }
            await gate.note(
                remaining: response.headers.first(name: "RateLimit-Remaining").flatMap(Int.init),
                reset: response.headers.first(name: "RateLimit-Reset").flatMap(Int.init))
            switch response.status.code {
            case 200:
                guard let json = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
                else { throw Failure(description: "\(path): not a JSON object") }
                return json
            case 404, 403:
                return nil
            case 401 where !refreshed:
                refreshed = true
                await tokens.invalidate(token)
            case 401:
                // A new token refused too: the key or its role was revoked. Every lookup
                // asking again (each name, each backoff) sent Apple hundreds of requests a
                // minute that could not succeed.
                await gate.refuseCredentials(for: .seconds(60))
                throw Failure(description: "\(path): Apple Ads answered 401 with a new token")
            case 429:
                // Apple's quota is the client's, not this request's: every request waits.
                let retryAfter = response.headers.first(name: "Retry-After").flatMap { RetryAfter.parse($0) }
                await gate.hold(for: max(retryAfter ?? backoff, .zero))
                backoff = min(backoff * 2, initialBackoff * 8)
            case 500...599:
                // Not retried here: the lookup's own retries back off, and meanwhile the
                // records waiting for the name go on without it (retried here, they waited
                // through every backoff first).
                throw Failure(description: "\(path): Apple Ads answered \(response.status.code)")
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

    func recoveries() async -> Int { await http.gate.recoveries }
    func untilRecovered(after recoveries: Int) async { await http.gate.untilRecovered(after: recoveries) }
    func onHold(_ handler: @escaping @Sendable () async -> Void) async { await http.gate.onHold(handler) }
    func heldFor() async -> Duration? { await http.gate.pause() }
    /// Ad account ids by org id (concurrent lookups share the request), and when it was asked.
    private var accounts: (task: Task<[Int64: [Int64]], Error>, at: ContinuousClock.Instant)?
    /// How long the accounts are kept; an org not among them is asked for again sooner.
    static let accountsTTL: Duration = .seconds(3600)
    static let missingOrgRecheck: Duration = .seconds(300)

    init(http: AppleAdsHTTP) {
        self.http = http
    }

    /// The ad accounts of an org, or every account the credentials see when it is unknown.
    func adAccounts(orgID: Int64?) async throws -> [Int64] {
        var byOrg = try await accountMap(maxAge: Self.accountsTTL)
        if let orgID, byOrg[orgID] == nil {
            // An account added since they were read (kept for the process's life, it was
            // never seen).
            byOrg = try await accountMap(maxAge: Self.missingOrgRecheck)
        }
        if let orgID, let mine = byOrg[orgID] { return mine }
        return byOrg.values.flatMap { $0 }
    }

    /// `GET /acls` by org, asked again once older than `maxAge`. An answer with no account
    /// (empty, or not Apple's shape) is an error, not kept: kept, it made every id
    /// "unknown" for the life of the process.
    private func accountMap(maxAge: Duration) async throws -> [Int64: [Int64]] {
        let task: Task<[Int64: [Int64]], Error>
        if let current = accounts, ContinuousClock.now - current.at < maxAge {
            task = current.task
        } else {
            let http = self.http
            task = Task {
                let json = try await http.get("/acls", context: nil)
                var byOrg: [Int64: [Int64]] = [:]
                for acl in (json?["result"] as? [String: Any])?["acls"] as? [[String: Any]] ?? [] {
                    guard let account = acl["adAccount"] as? [String: Any], let id = Self.int(account["id"]) else {
                        continue
                    }
                    let org = Self.int(account["orgId"]) ?? 0
                    if !(byOrg[org] ?? []).contains(id) { byOrg[org, default: []].append(id) }
                }
                guard !byOrg.isEmpty else {
                    throw AppleAdsHTTP.Failure(
                        description: "/acls: Apple Ads named no ad account for these credentials")
                }
                return byOrg
            }
            accounts = (task, ContinuousClock.now)
        }
        do {
            return try await task.value
        } catch {
            if accounts?.task == task { accounts = nil }  // asked again next time
            throw error
        }
    }

    /// The `result` object of the first ad account that knows the entity.
    func entity(_ path: String, orgID: Int64?) async throws -> [String: Any]? {
        for account in try await adAccounts(orgID: orgID) {
            guard let json = try await http.get(path, context: "adAccountId=\(account)") else { continue }
            // A 200 without the entity is no verdict on the id: kept as "unknown", it hid
            // the name for an hour.
            guard let result = json["result"] as? [String: Any] else {
                throw AppleAdsHTTP.Failure(description: "\(path): an answer without its result")
            }
            return result
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
                // Apple may answer fewer than asked (its largest page is not documented):
                // the pages that `pagination.totalCount` says remain are asked for too.
                var offset = 0
                for _ in 0..<AppleAdsHTTP.maxReportPages {
                    let query: [String: Any] = [
                        "filters": [["field": "id", "operator": "IN", "value": chunk]],
                        "pagination": ["offset": offset, "pageSize": chunk.count],
                    ]
                    let json = try await http.post(
                        "/keywords/query", json: try JSONSerialization.data(withJSONObject: query),
                        context: "adAccountId=\(account)")
                    guard let json else { break }
                    guard let results = json["result"] as? [[String: Any]] else {
                        throw AppleAdsHTTP.Failure(description: "/keywords/query: an answer without its result")
                    }
                    for keyword in results {
                        guard let id = Self.int(keyword["id"]), let text = keyword["text"] as? String,
                            AppleAdsHTTP.isName(text)
                        else { continue }
                        found[id] = (text, AppleAdsHTTP.matchType(keyword["matchType"]))
                    }
                    offset += results.count
                    let total = ((json["pagination"] as? [String: Any])?["totalCount"]).flatMap(Self.int)
                    guard !results.isEmpty, let total, offset < total else { break }
                }
            }
        }
        return found
    }

    func keyword(id: Int64, adGroupID: Int64?, campaignID: Int64?, orgID: Int64?) async throws -> (
        text: String, matchType: String?
    )? {
        guard let result = try await entity("/keywords/\(id)", orgID: orgID) else { return nil }
        return (
            try AppleAdsHTTP.field("text", of: result, at: "/keywords/\(id)"),
            AppleAdsHTTP.matchType(result["matchType"])
        )
    }

    func adGroupName(id: Int64, campaignID: Int64?, orgID: Int64?) async throws -> String? {
        try await entity("/adgroups/\(id)", orgID: orgID).map {
            try AppleAdsHTTP.field("name", of: $0, at: "/adgroups/\(id)")
        }
    }

    func campaignName(id: Int64, orgID: Int64?) async throws -> String? {
        try await entity("/campaigns/\(id)", orgID: orgID).map {
            try AppleAdsHTTP.field("name", of: $0, at: "/campaigns/\(id)")
        }
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

    func recoveries() async -> Int { await http.gate.recoveries }
    func untilRecovered(after recoveries: Int) async { await http.gate.untilRecovered(after: recoveries) }
    func onHold(_ handler: @escaping @Sendable () async -> Void) async { await http.gate.onHold(handler) }
    func heldFor() async -> Duration? { await http.gate.pause() }
    var asksByOrg: Bool { true }

    /// v5's bulk find is per campaign; lookups go one by one.
    func keywords(ids: [Int64], orgID: Int64?) async throws -> [Int64: (text: String, matchType: String?)]? { nil }

    func keyword(id: Int64, adGroupID: Int64?, campaignID: Int64?, orgID: Int64?) async throws -> (
        text: String, matchType: String?
    )? {
        guard let adGroupID, let campaignID, let orgID else { throw AppleAdsHTTP.CannotAsk() }
        let path = "/campaigns/\(campaignID)/adgroups/\(adGroupID)/targetingkeywords/\(id)"
        guard let data = try await entity(path, orgID: orgID) else { return nil }
        return (try AppleAdsHTTP.field("text", of: data, at: path), AppleAdsHTTP.matchType(data["matchType"]))
    }

    func adGroupName(id: Int64, campaignID: Int64?, orgID: Int64?) async throws -> String? {
        guard let campaignID, let orgID else { throw AppleAdsHTTP.CannotAsk() }
        let path = "/campaigns/\(campaignID)/adgroups/\(id)"
        return try await entity(path, orgID: orgID).map { try AppleAdsHTTP.field("name", of: $0, at: path) }
    }

    func campaignName(id: Int64, orgID: Int64?) async throws -> String? {
        guard let orgID else { throw AppleAdsHTTP.CannotAsk() }
        let path = "/campaigns/\(id)"
        return try await entity(path, orgID: orgID).map { try AppleAdsHTTP.field("name", of: $0, at: path) }
    }

    /// v5's `data` object, nil for 404/403; a 200 without it is an error.
    func entity(_ path: String, orgID: Int64) async throws -> [String: Any]? {
        guard let json = try await http.get(path, context: "orgId=\(orgID)") else { return nil }
        guard let data = json["data"] as? [String: Any] else {
            throw AppleAdsHTTP.Failure(description: "\(path): an answer without its data")
        }
        return data
    }
}

extension AppleAdsHTTP {
    /// The record lacks what the API needs to find the entity (v5 asks by org, campaign
    /// and ad group): no verdict on the id, so nothing is cached and nothing retried; a
    /// record that has them asks.
    struct CannotAsk: Error, CustomStringConvertible {
        var description: String { "the record lacks the org, campaign or ad group id the API asks by" }
    }

    /// The text at `key` of an entity Apple answered with; an entity without it, or with
    /// one no record could hold (empty, past 1,024 characters, a control character), is
    /// an error: every record with the id would carry it for the cache's life.
    static func field(_ key: String, of entity: [String: Any], at path: String) throws -> String {
        guard let text = entity[key] as? String else {
            throw Failure(description: "\(path): an answer without its \(key)")
        }
        guard isName(text) else { throw Failure(description: "\(path): an answer whose \(key) is not a name") }
        return text
    }

    /// What records may hold as a name, as the routes and `keywords import` read them.
    static func isName(_ text: String) -> Bool {
        !text.isEmpty && PayloadFields.fitsLengthLimit(text)
            && !text.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    /// A match type as Apple writes them (`EXACT`, `BROAD`, v1's `PHRASE`, `CATEGORY`: a
    /// short upper-case word, so that one Apple adds later is kept); anything else is left out.
    static func matchType(_ value: Any?) -> String? {
        guard let text = value as? String, (1...32).contains(text.utf8.count),
            text.utf8.allSatisfy({ (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) || $0 == UInt8(ascii: "_") })
        else { return nil }
        return text
    }
}

/// The pause Apple's rate-limit headers and `429`s ask for, and a refusal of the
/// credentials, shared by every request of one client.
actor RateGate {
    private var until: ContinuousClock.Instant?
    private var refusedUntil: ContinuousClock.Instant?
    /// Called by each request about to wait out a pause: the name lookups count as failing
    /// meanwhile, so the records waiting for names go on, while every request (a name's, a
    /// bulk query's, the spend fetch's, the shared `/acls`) waits the pause out in its own
    /// loop, its backoff doubling.
    private(set) var holdHandler: (@Sendable () async -> Void)?

    func onHold(_ handler: @escaping @Sendable () async -> Void) { holdHandler = handler }

    /// Every request waits `duration` from now (a `429`'s `Retry-After`).
    func hold(for duration: Duration) {
        let end = ContinuousClock.now.advanced(by: min(duration, .seconds(3600)))
        if until.map({ $0 < end }) ?? true { until = end }
    }

    func refuseCredentials(for duration: Duration) {
        refusedUntil = ContinuousClock.now.advanced(by: duration)
    }

    /// Apple Ads failing (`5xx`, no answer): until when requests are refused at once, the
    /// wait (doubling to 15 s), and until when one request is out to find whether it
    /// is back (a probe that never reports, cancelled, is replaced after the timeout).
    private var outage: (until: ContinuousClock.Instant, backoff: Duration, probeUntil: ContinuousClock.Instant?)?

    /// How long requests are refused because Apple Ads is failing; nil lets this one go,
    /// as the probe when Apple Ads was failing.
    func outageWait() -> Duration? {
        guard var current = outage else { return nil }
        let now = ContinuousClock.now
        if now < current.until { return current.until - now }
        // The probe is out: asked again a second from now, when it has usually failed and
        // set the next probe's time (waiting a whole wait, a name would sleep past it, and
        // names would come back a whole wait after Apple Ads); its success wakes them.
        if let probe = current.probeUntil, now < probe { return min(probe - now, .seconds(1)) }
        current.probeUntil = now.advanced(by: .seconds(35))
        outage = current
        return nil
    }

    /// A `5xx` or no answer: the first starts an outage; a failed probe doubles its wait.
    /// Failures of requests sent before the outage was seen change nothing.
    func noteFailure(initial: Duration) {
        let now = ContinuousClock.now
        guard let current = outage else {
            outage = (now.advanced(by: initial), initial, nil)
            return
        }
        guard current.probeUntil != nil else { return }
        // At most 15 s apart: names come back within that of Apple Ads, and one request
        // in 15 s asks nothing of an API that is down.
        let next = min(current.backoff * 2, .seconds(15))
        outage = (now.advanced(by: next), next, nil)
    }

    /// Apple Ads answered (anything but a `5xx`): the outage, if any, is over, and the
    /// retries waiting for that are woken together, so that a record's names come back
    /// at once rather than each at its own retry, up to a minute apart.
    func noteAnswer() {
        guard outage != nil else { return }
        outage = nil
        recoveries += 1
        let waiting = recoveryWaiters.values
        recoveryWaiters = [:]
        for waiter in waiting { waiter.resume() }
    }

    private var recoveryWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
    private var nextWaiter = 0
    /// Outages ended so far.
    private(set) var recoveries = 0

    /// Returns when an outage ends after `count` had (at once if one already has: the
    /// outage may end between a retry's failure and its wait), or when cancelled.
    func untilRecovered(after count: Int) async {
        nextWaiter += 1
        let id = nextWaiter
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                if Task.isCancelled || recoveries > count {
                    continuation.resume()
                } else {
                    recoveryWaiters[id] = continuation
                }
            }
        } onCancel: {
            Task { await self.stopWaiting(id) }
        }
    }

    private func stopWaiting(_ id: Int) {
        recoveryWaiters.removeValue(forKey: id)?.resume()
    }

    /// How long the credentials stay refused, if they are.
    func refusedCredentials() -> Duration? { Self.left(&refusedUntil) }

    /// How long to wait before the next request, if at all.
    func pause() -> Duration? { Self.left(&until) }

    /// The time left until `end`; nil, and `end` forgotten, once it has passed.
    private static func left(_ end: inout ContinuousClock.Instant?) -> Duration? {
        guard let instant = end else { return nil }
        let now = ContinuousClock.now
        guard instant > now else {
            end = nil
            return nil
        }
        return instant - now
    }

    func note(remaining: Int?, reset: Int?) {
        guard remaining == 0, let reset, reset > 0 else { return }
        until = ContinuousClock.now.advanced(by: .seconds(min(reset, 60)))
    }
}
