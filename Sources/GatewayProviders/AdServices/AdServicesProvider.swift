import AsyncHTTPClient
import Foundation
import GatewayCore
import GatewayHTTP

/// Apple Search Ads self-attribution: the app posts its AdServices token, and the gateway
/// resolves it with Apple and keeps retrying the way Apple asks.
///
/// `POST /v1/adservices` answers at once with the record id: the token is pending work in
/// the store until Apple's answer makes it a record. Apple's `404` (too soon, or a token
/// older than 24 h) is retried on a short schedule and then recorded as `not_found`;
/// `400` is recorded as `invalid` at once; `5xx`, timeouts and connection errors back off
/// until the token's 24 hours are over. The token is the dedupe key, so a token posted
/// twice reaches Apple once.
public struct AdServicesProvider: DeferredAttributionProvider {
    public static let typeName = "adservices"
    public var name: String { Self.typeName }
    public var routes: [ProviderRoute] { [ProviderRoute(.post, "/v1/adservices")] }

    public struct Options: Sendable {
        public var endpoint = "https://api-adservices.apple.com/api/v1/"
        /// Apple holds a connection up to a second before a `404`, so this must exceed 1 s.
        public var timeout: Duration = .seconds(5)
        /// Apple: "retries at intervals of 5 seconds, with a maximum of three attempts".
        public var notFoundRetries = 2
        public var notFoundInterval: Duration = .seconds(5)
        public var errorBackoffInitial: Duration = .seconds(1)
        public var errorBackoffMax: Duration = .seconds(300)
        /// After this long, errors stop being retried (Apple forgets tokens after 24 h).
        public var giveUpAfter: Duration = .seconds(24 * 3600)
        public var answerWait: Duration = .milliseconds(1500)
        public var concurrency = 8
        /// The app whose users the ASA Attribution SDK's routes (`/functions/v1/…`)
        /// serve; those routes are off without it.
        public var sdkAppID: String?

        public init() {}
    }

    public let options: Options
    let client: AdServicesClient
    let now: @Sendable () -> Date
    let random: @Sendable () -> Double

    public init(
        options: Options, httpClient: HTTPClient = NoRedirectHTTPClient.shared,
        now: @escaping @Sendable () -> Date = { Date() },
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) {
        self.options = options
        self.client = AdServicesClient(endpoint: options.endpoint, timeout: options.timeout, client: httpClient)
        self.now = now
        self.random = random
    }

    public var resolveConcurrency: Int { options.concurrency }
    public var answerWait: Duration { options.answerWait }

    /// The longest token accepted; real ones are about a kilobyte of Base64.
    static let maxTokenLength = 16 * 1024

    /// What is kept while the token waits for Apple, and what the attempts so far saw.
    /// Codable for the format it was stored in before `stored` (AdServicesState.swift).
    struct State: Codable, Sendable, Equatable {
        var token: String
        var appID: String
        var appUserID: String
        var idfv: String?
        var idfa: String?
        var attStatus: Int?
        var notFound = 0
        var errors = 0
        var malformed = 0
    }

    // MARK: accepting

    public func accept(_ payload: IngestPayload) throws -> PendingWork {
        let fields = try PayloadFields.parseObject(payload.body)
        let token = try Self.token(fields)
        let appID = try fields.requiredString("app_id")
        let appUserID = try fields.requiredString("app_user_id")
        let device = try DeviceFields(fields)
        let state = State(
            token: token, appID: appID, appUserID: appUserID, idfv: device.idfv, idfa: device.idfa,
            attStatus: device.attStatus)
        return PendingWork(
            provider: name, dedupeKey: Self.dedupeKey(token: token), appID: appID, receivedAt: payload.receivedAt,
            state: state.stored)
    }

    static func token(_ fields: PayloadFields) throws -> String {
        guard let value = fields.value("token") else { throw GatewayError.missing("token") }
        guard case .string(let raw) = value else {
            throw GatewayError.invalid("token", "expected a string, found \(value.typeName)")
        }
        return try checkToken(raw, field: "token")
    }

    /// The token without surrounding whitespace, or an error naming `field`.
    public static func checkToken(_ raw: String, field: String) throws -> String {
        let token = raw.trimmingWhitespace()
        guard !token.isEmpty else { throw GatewayError.missing(field) }
        guard token.utf8.count <= maxTokenLength else {
            throw GatewayError.invalid(field, "longer than \(maxTokenLength) characters")
        }
        // AAAttribution.attributionToken() returns Base64; anything else cannot be a token.
        let base64 = token.utf8.allSatisfy { c in
            (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c == 43 || c == 47 || c == 61
                || c == 45 || c == 95
        }
        guard base64 else { throw GatewayError.invalid(field, "expected the Base64 token from attributionToken()") }
        return token
    }

    /// The token itself is the dedupe key (hashed: tokens are long, and keys are logged).
    static func dedupeKey(token: String) -> String {
        "adservices:" + SHA256Text.hex(token)
    }

    // MARK: resolving

    public func resolve(_ work: PendingWork) async -> ResolutionStep {
        guard var state = State(stored: work.state) else {
            // Only a store written by another version could hold this; keep the evidence.
            return .finished([
                record(work, nil, resolution: .invalid, apple: ["error": .string("unreadable pending state")])
            ])
        }
        switch await client.post(token: state.token) {
        case .answer(let body):
            return answered(work, &state, body: body)
        case .badToken:
            return .finished([record(work, state, resolution: .invalid, apple: ["status": .integer(400)])])
        case .notFound:
            guard state.notFound < options.notFoundRetries else {
                return .finished([record(work, state, resolution: .notFound, apple: ["status": .integer(404)])])
            }
            state.notFound += 1
            return retry(after: options.notFoundInterval, "Apple answered 404 (not found yet)", state)
        case .unavailable(let status, let retryAfter):
            return failed(
                work, &state, "Apple answered \(status)", floor: retryAfter, apple: ["status": .integer(Int64(status))])
        case .transport(let error):
            return failed(work, &state, "cannot reach Apple: \(error)", floor: nil, apple: ["error": .string(error)])
        }
    }

    func answered(_ work: PendingWork, _ state: inout State, body: Data) -> ResolutionStep {
        var record = record(work, state, resolution: .resolved, apple: ["status": .integer(200)])
        do {
            let fields = try PayloadFields.parseObject(body)
            try AdServicesAnswer.apply(fields, to: &record)
            record.raw = raw(work, state, apple: ["status": .integer(200), "body": .object(fields.object)])
            return .finished([record])
        } catch {
            // A 200 that is not Apple's JSON is most likely a proxy's page: retry a few
            // times, then keep what came as an invalid record rather than retry for a day.
            let text = String(decoding: body.prefix(2048), as: UTF8.self)
            guard state.malformed < 2 else {
                // Made afresh: the answer may have been applied part way (`attribution: true`
                // read before an unreadable id), and an answer not read attributes nothing.
                return .finished([
                    self.record(
                        work, state, resolution: .invalid,
                        apple: ["status": .integer(200), "unreadable_body": .string(text)])
                ])
            }
            state.malformed += 1
            return retry(
                after: backoff(state.malformed + state.errors, floor: nil),
                "Apple's 200 answer is unreadable: \(error)", state)
        }
    }

    func failed(
        _ work: PendingWork, _ state: inout State, _ error: String, floor: Duration?, apple: [String: JSONValue]
    ) -> ResolutionStep {
        let age = now().timeIntervalSince(work.receivedAt)
        if age >= options.giveUpAfter / .seconds(1) {
            var apple = apple
            apple["gave_up_after_attempts"] = .integer(Int64(work.attempts + 1))
            return .finished([record(work, state, resolution: .notFound, apple: apple)])
        }
        state.errors += 1
        return retry(after: backoff(state.errors, floor: floor), error, state)
    }

    func retry(after delay: Duration, _ error: String, _ state: State) -> ResolutionStep {
        .retry(after: delay, error: error, state: state.stored)
    }

    /// Doubling from the initial delay, capped, with jitter in its upper half; never
    /// sooner than Apple's `Retry-After`.
    func backoff(_ failures: Int, floor: Duration?) -> Duration {
        let initial = options.errorBackoffInitial / .seconds(1)
        let cap = options.errorBackoffMax / .seconds(1)
        let base = min(cap, initial * pow(2, Double(max(0, failures - 1))))
        var seconds = base * (0.5 + 0.5 * random())
        if let floor { seconds = max(seconds, floor / .seconds(1)) }
        return .milliseconds(Int64(seconds * 1000))
    }

    public func waitingRecord(_ work: PendingWork) -> AttributionRecord? {
        State(stored: work.state).map { record(work, $0, resolution: .pending, apple: [:]) }
    }

    /// The record for `work`, with the app's fields and no answer yet.
    func record(_ work: PendingWork, _ state: State?, resolution: Resolution, apple: [String: JSONValue])
        -> AttributionRecord
    {
        var record = AttributionRecord(
            provider: name, kind: .install, dedupeKey: work.dedupeKey, receivedAt: work.receivedAt,
            attributed: false, resolution: resolution, recordID: work.recordID)
        record.appID = state?.appID ?? work.appID
        record.appUserID = state?.appUserID
        record.idfv = state?.idfv
        record.idfa = state?.idfa
        record.attStatus = state?.attStatus
        record.raw = state.map { raw(work, $0, apple: apple) } ?? .object(["apple": .object(apple)])
        return record
    }

    /// What the app sent (the token as its hash) and what Apple answered.
    /// The token's hash is the work's dedupe key less its prefix: not computed again.
    func raw(_ work: PendingWork, _ state: State, apple: [String: JSONValue]) -> JSONValue {
        var request: [String: JSONValue] = [
            "app_id": .string(state.appID), "app_user_id": .string(state.appUserID),
            // The key may carry "@app" when another app's work held the plain one.
            "token_sha256": .string(String(work.dedupeKey.dropFirst("adservices:".count).prefix { $0 != "@" })),
        ]
        if let idfv = state.idfv { request["idfv"] = .string(idfv) }
        if let attStatus = state.attStatus { request["att_status"] = .integer(Int64(attStatus)) }
        return .object(["request": .object(request), "apple": .object(apple)])
    }

    // MARK: offline

    /// What an imported answer may carry beside Apple's fields: what the app had sent.
    static let appFields = ["app_id", "app_user_id", "idfv", "idfa", "att_status", "token"]

    /// Normalises an answer from Apple, as `attribution-gateway normalize --provider
    /// adservices < apple-answer.json` does. The app's fields (`app_id`, `app_user_id`,
    /// `idfv`, `idfa`, `att_status`) are read when the answer carries them beside Apple's,
    /// as answers kept per user and imported as history do: without them no purchase joins it.
    public func normalize(_ payload: IngestPayload) throws -> [AttributionRecord] {
        let fields = try PayloadFields.parseObject(payload.body)
        let digest = SHA256Text.hex(payload.body)
        var record = AttributionRecord(
            provider: name, kind: .install, dedupeKey: "adservices:answer:\(digest)", receivedAt: payload.receivedAt)
        record.appID = try fields.string("app_id")
        record.appUserID = try fields.string("app_user_id")
        let device = try DeviceFields(fields)
        device.apply(to: &record)
        // The app's fields apart from Apple's answer, as a live record keeps them: the IDFA
        // not at all (the record has it, with consent), a token only as its hash.
        var apple = fields.object
        var request: [String: JSONValue] = [:]
        for key in Self.appFields {
            if let value = apple.removeValue(forKey: key) { request[key] = value }
        }
        // Apple's answer alone: its organic `{}` beside the app's fields is still `{}`.
        // But a token with nothing of Apple's is the route's request, not an answer: read
        // as organic, a file of requests stored every user as organic, Apple never asked.
        // (A field of Apple's left empty, `null`, as an export of requests writes it, is none.)
        if request["token"] != nil, apple.values.allSatisfy({ $0 == .null }) {
            throw GatewayError.invalid(
                "attribution",
                "a token with none of Apple's answer is a request for POST /v1/adservices, not an answer; "
                    + #"post it there, or write Apple's organic answer as {"attribution": false} beside the token"#)
        }
        try AdServicesAnswer.apply(PayloadFields(apple, path: fields.path), to: &record)
        request["idfa"] = nil
        if case .string(let token)? = request.removeValue(forKey: "token"), !token.isEmpty {
            request["token_sha256"] = .string(SHA256Text.hex(token))
            // The token keys it, as the live route does: the answer to a token already
            // resolved, or imported before in another envelope or spelling, is a duplicate.
            record.dedupeKey = Self.dedupeKey(token: token.trimmingWhitespace())
        }
        var raw: [String: JSONValue] = ["apple": .object(["status": .integer(200), "body": .object(apple)])]
        if !request.isEmpty { raw["request"] = .object(request) }
        record.raw = .object(raw)
        return [record]
    }
}
