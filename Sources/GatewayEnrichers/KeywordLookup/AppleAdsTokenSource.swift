import AsyncHTTPClient
import Foundation
import NIOCore

/// Access tokens for Apple Ads, exchanged for the client secret at the token endpoint and
/// cached: one request per hour, however many lookups wait, refreshed a few minutes before
/// expiry or when the API says 401. The client secret is remade before its own expiry.
actor AppleAdsTokenSource {
    let secret: AppleAdsClientSecret
    let tokenEndpoint: String
    let client: HTTPClient
    let now: @Sendable () -> Date

    private var token: (value: String, expires: Date)?
    private var clientSecret: (jwt: String, expires: Date)?
    private var inFlight: Task<String, Error>?

    init(secret: AppleAdsClientSecret, tokenEndpoint: String, client: HTTPClient, now: @escaping @Sendable () -> Date) {
        self.secret = secret
        self.tokenEndpoint = tokenEndpoint
        self.client = client
        self.now = now
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// A valid access token; concurrent callers share one request.
    func accessToken() async throws -> String {
        if let token, token.expires.timeIntervalSince(now()) > 300 { return token.value }
        if let inFlight { return try await inFlight.value }
        let task = Task { try await self.fetch() }
        inFlight = task
        defer { inFlight = nil }
        return try await task.value
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
        let exchange = try await client.exchange(request, timeout: .seconds(30), bodyLimit: 1 << 20)
        let response = exchange.response
        let body = try exchange.body.get()
        // Never the body in errors: an answer might echo what was sent.
        guard response.status.code == 200 else { throw Failure(description: "token endpoint answered \(response.status.code)") }
        guard let json = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any],
            let value = json["access_token"] as? String
        else { throw Failure(description: "token endpoint answered without an access_token") }
        let lifetime = (json["expires_in"] as? Int) ?? 3600
        token = (value, now().addingTimeInterval(Double(lifetime)))
        return value
    }

    static func formEncode(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}
