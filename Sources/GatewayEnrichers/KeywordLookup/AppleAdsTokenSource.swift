import AsyncHTTPClient
import Foundation
import GatewayCore
import GatewayHTTP
import Logging
import NIOCore

/// Access tokens for Apple Ads, exchanged for the client secret at the token endpoint and
/// cached: one request per hour, however many lookups wait, refreshed a few minutes before
/// expiry or when the API says 401. The client secret is remade before its own expiry.
actor AppleAdsTokenSource {
    let secret: AppleAdsClientSecret
    let tokenEndpoint: String
    let client: HTTPClient
    let now: @Sendable () -> Date
    /// Tells of a background renewal that failed: nothing waits on it to see the error.
    let logger: Logger

    private var token: (value: String, expires: Date, margin: TimeInterval)?
    private var clientSecret: (jwt: String, expires: Date)?
    private var inFlight: Task<String, Error>?

    init(
        secret: AppleAdsClientSecret, tokenEndpoint: String, client: HTTPClient, now: @escaping @Sendable () -> Date,
        logger: Logger = Logger(label: "gateway.enricher.keyword_lookup")
    ) {
        self.secret = secret
        self.tokenEndpoint = tokenEndpoint
        self.client = client
        self.now = now
        self.logger = logger
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        /// The endpoint refused the client (`400 invalid_client`, `401`: a revoked key),
        /// which asking again will not change.
        var refusedClient = false
    }

    /// A valid access token; concurrent callers share one request.
    func accessToken() async throws -> String {
        let now = now()
        // Renewed ahead of its end, by five minutes or, for a short-lived one, half its life
        // (a fixed five minutes made one of five minutes or less new at every call).
        if let token, token.expires.timeIntervalSince(now) > token.margin { return token.value }
        if let token, token.expires > now {
            // The renewal goes on in the background, at most one every 30 s, and the token
            // serves until its end: awaited, a renewal that failed would drop a good token,
            // and one that hung would hold every lookup for its 30 s.
            if inFlight == nil, lastRenewal.map({ now.timeIntervalSince($0) >= Self.renewalSpacing }) ?? true {
                lastRenewal = now
                let renewal = fetchTask()
                inFlight = renewal
                // Nobody awaits it: a revoked key would otherwise show only at the end.
                let expires = token.expires, logger = logger
                Task {
                    if case .failure(let error) = await renewal.result {
                        logger.warning(
                            "Apple Ads token renewal failed; the current token serves until its end",
                            metadata: ["error": "\(error)", "expires": "\(ISO8601.format(expires))"])
                    }
                }
            }
            return token.value
        }
        if let inFlight { return try await inFlight.value }
        let task = fetchTask()
        inFlight = task
        return try await task.value
    }

    /// How often a token still good is tried to be renewed.
    static let renewalSpacing: TimeInterval = 30
    private var lastRenewal: Date?
    /// Which fetch `inFlight` is, so that an older one ending does not clear a newer one.
    private var fetches = 0

    private func fetchTask() -> Task<String, Error> {
        fetches += 1
        let mine = fetches
        return Task {
            do {
                let value = try await self.fetch()
                self.ended(mine)
                return value
            } catch {
                self.ended(mine)
                throw error
            }
        }
    }

    private func ended(_ fetch: Int) {
        if fetch == fetches { inFlight = nil }
    }

    /// Forgets a token the API refused, so that the next call fetches a new one.
    func invalidate(_ value: String) {
        if token?.value == value { token = nil }
    }

    private func fetch() async throws -> String {
        if clientSecret == nil || clientSecret!.expires.timeIntervalSince(now()) < 86_400 {
            clientSecret = try secret.make(now: now())
        }
        let form = [
            ("grant_type", "client_credentials"), ("client_id", secret.clientID), ("client_secret", clientSecret!.jwt),
            ("scope", "searchadsorg"),
        ].map { "\($0)=\(Self.formEncode($1))" }.joined(separator: "&")
        var request = HTTPClientRequest(url: tokenEndpoint)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(ByteBuffer(string: form))
        let exchange: BoundedExchange
        do {
            exchange = try await client.exchange(request, timeout: .seconds(30), bodyLimit: 1 << 20)
        } catch {
            // Named, as the API's failures are: `deadlineExceeded` alone said nothing of where.
            throw Failure(description: "token endpoint \(ShownURL.of(tokenEndpoint)) unreachable: \(error)")
        }
        let response = exchange.response
        let body = try exchange.body.get()
        // Never the body in errors: an answer might echo what was sent. Its OAuth `error`
        // is a word of a fixed list, shown; only `invalid_client` (a revoked or wrong key)
        // refuses the client: another 400 (a proxy's, `unsupported_grant_type`) may pass.
        guard response.status.code == 200 else {
            let code = Int(response.status.code)
            let json = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
            let error = (json?["error"] as? String).flatMap { word in
                word.count <= 40 && word.allSatisfy({ $0.isLetter || $0 == "_" }) ? word : nil
            }
            throw Failure(
                description: "token endpoint \(ShownURL.of(tokenEndpoint)) answered \(code)"
                    + (error.map { " (\($0))" } ?? ""),
                refusedClient: code == 401 || (code == 400 && error == "invalid_client"))
        }
        guard let json = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any],
            let value = json["access_token"] as? String
        else { throw Failure(description: "token endpoint answered without an access_token") }
        let lifetime = (json["expires_in"] as? Int) ?? 3600
        token = (value, now().addingTimeInterval(Double(lifetime)), min(300, Double(lifetime) / 2))
        return value
    }

    static func formEncode(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}
