import Foundation
import HTTPTypes
import GatewayConfig
import GatewayServer
import Hummingbird
import HummingbirdTesting
import Testing

/// Guessing operator keys, over loopback HTTP: ten wrong ones, then every try from that
/// client is refused, a right key too, while others and signed-in browsers go on.
@Suite struct OperatorKeyGuessesTests {
    static let forwardedFor = HTTPField.Name("X-Forwarded-For")!

    @Test func tenWrongKeysThenTheClientWaitsWhateverItSends() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        // Behind a trusted proxy, so that two clients can be told apart on loopback.
        let yaml = ReportRoutesTests.yaml(env, auth: ReportRoutesTests.operatorOnly)
            .replacingOccurrences(
                of: "log_level: warning }", with: "log_level: warning, trusted_proxies: [127.0.0.1/32] }")
        let configuration = try ConfigLoader.parse(yaml: yaml, file: "guess.yaml", environment: [:], registry: .builtIn)
        let gateway = try await Gateway.build(configuration: configuration)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            func login(_ key: String, from address: String) async throws -> TestResponse {
                try await client.execute(
                    uri: "/dashboard/login", method: .post,
                    headers: [.contentType: "application/x-www-form-urlencoded", Self.forwardedFor: address],
                    body: ByteBuffer(string: "key=\(key)&next=%2Fdashboard"))
            }
            func report(_ key: String, from address: String) async throws -> TestResponse {
                try await client.execute(
                    uri: "/v1/reports/keywords", method: .get,
                    headers: [.authorization: "Bearer \(key)", Self.forwardedFor: address])
            }
            let guesser = "203.0.113.5"
            let session = try #require(
                try await login(ReportRoutesTests.operatorKey, from: guesser).headers[.setCookie]?.prefix { $0 != ";" })

            for attempt in 0..<10 {
                let wrong =
                    attempt.isMultiple(of: 2)
                    ? try await login("guess-\(attempt)", from: guesser)
                    : try await report("guess-\(attempt)", from: guesser)
                #expect(wrong.status == .unauthorized, "attempt \(attempt)")
            }
            // The eleventh try is refused before its key is looked at: a right one too.
            let form = try await login(ReportRoutesTests.operatorKey, from: guesser)
            #expect(form.status == .tooManyRequests && form.headers[.setCookie] == nil)
            #expect(Int(form.headers[.retryAfter] ?? "") ?? 0 >= 1)
            #expect(String(buffer: form.body).contains("Too many wrong keys were sent from here."))
            let json = try await report(ReportRoutesTests.operatorKey, from: guesser)
            #expect(json.status == .tooManyRequests && json.headers[.retryAfter] != nil)
            #expect(String(buffer: json.body).contains(#""code":"rate_limited""#))
            #expect(!String(buffer: json.body).contains(ReportRoutesTests.operatorKey))
            let bearer = try await client.execute(
                uri: "/dashboard", method: .get,
                headers: [.authorization: "Bearer \(ReportRoutesTests.operatorKey)", Self.forwardedFor: guesser])
            #expect(bearer.status == .tooManyRequests)

            // A browser signed in before goes on; so does another client.
            let signedIn = try await client.execute(
                uri: "/dashboard", method: .get, headers: [.cookie: String(session), Self.forwardedFor: guesser])
            #expect(signedIn.status == .ok)
            #expect(try await report(ReportRoutesTests.operatorKey, from: "203.0.113.6").status == .ok)
            #expect(try await login(ReportRoutesTests.operatorKey, from: "203.0.113.6").status == .seeOther)
        }
    }
}
