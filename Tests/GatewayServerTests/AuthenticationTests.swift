import Foundation
import GatewayConfig
import GatewayCore
import GatewayServer
import Hummingbird
import HummingbirdTesting
import Testing

/// Per-app API keys on the app-facing routes.
@Suite struct AuthenticationTests {
    static let appKey = "key-for-app-1234567890"

    func configuration(_ env: TestEnvironment) throws -> GatewayConfiguration {
        let rotated = SHA256Hex.digest("rotated-key-0000000000").map { String(format: "%02x", $0) }.joined()
        let yaml =
            env.yaml() + """

                auth:
                  api_keys:
                    - { app_id: "1234567890", key: "${APP_KEY}" }
                    - { app_id: "1234567890", key_sha256: "\(rotated)" }
                    - { app_id: "999", key: "key-for-another-app-999" }
                """
        return try ConfigLoader.parse(
            yaml: yaml, file: "auth.yaml", environment: ["APP_KEY": Self.appKey], registry: .builtIn)
    }

    @Test func keysAdmitTheirOwnAppOnly() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try configuration(env))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            let body = ByteBuffer(string: IAdPayloads.attributed(user: "authed"))
            func post(_ authorization: String?, _ body: ByteBuffer) async throws -> TestResponse {
                var headers = HTTPFields()
                if let authorization { headers[.authorization] = authorization }
                return try await client.execute(uri: "/v1/iad", method: .post, headers: headers, body: body)
            }

            let missing = try await post(nil, body)
            #expect(missing.status == .unauthorized)
            #expect(String(buffer: missing.body).contains(#""code":"unauthorized""#))
            #expect(try await post("Bearer not-a-key-at-all-000", body).status == .unauthorized)
            #expect(try await post(Self.appKey, body).status == .unauthorized)

            // Another app's key cannot write this app's records, and nothing is stored.
            let other = try await post("Bearer key-for-another-app-999", body)
            #expect(other.status == .forbidden)
            #expect(String(buffer: other.body).contains(#""field":"app_id""#))
            #expect(try await gateway.store.outboxStats().isEmpty)

            #expect(try await post("Bearer \(Self.appKey)", body).status == .accepted)
            let rotated = ByteBuffer(string: IAdPayloads.attributed(user: "rotated"))
            #expect(try await post("bearer rotated-key-0000000000", rotated).status == .accepted)

            // Operator routes stay open.
            #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok)

            // Refusals are counted where the payload's own faults are, by code.
            let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            #expect(metrics.contains(#"gateway_records_rejected_total{provider="iad",code="unauthorized"} 3"#))
            #expect(metrics.contains(#"gateway_records_rejected_total{provider="iad",code="forbidden"} 1"#))
        }
    }

    /// The ASA Attribution SDK presents its key as Supabase's functions take it, in an
    /// `apikey` header, not as a bearer token.
    @Test func theSDKsFunctionsTakeTheKeyFromItsApikeyHeader() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let yaml =
            env.yaml() + """

                auth:
                  api_keys:
                    - { app_id: "1234567890", key: "\(Self.appKey)" }
                    - { app_id: "999", key: "key-for-another-app-999" }
                """
        let withSDK = yaml.replacingOccurrences(
            of: "  iad: { enabled: true }",
            with: "  iad: { enabled: true }\n  adservices: { enabled: true, sdk: { app_id: \"1234567890\" } }")
        let configuration = try ConfigLoader.parse(
            yaml: withSDK, file: "auth.yaml", environment: [:], registry: .builtIn)
        let gateway = try await Gateway.build(configuration: configuration)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client async throws in
            func create(_ headers: HTTPFields) async throws -> Int {
                Int(
                    try await client.execute(
                        uri: "/functions/v1/create-user", method: .post, headers: headers,
                        body: ByteBuffer(string: "{}")
                    ).status.code)
            }
            let apikey = HTTPFields.Element.Name("apikey")!
            #expect(try await create([:]) == 401)
            #expect(try await create([apikey: "not-a-key-at-all-000"]) == 401)
            #expect(try await create([apikey: "key-for-another-app-999"]) == 403)
            #expect(try await create([apikey: Self.appKey]) == 200)
            #expect(try await create([.authorization: "Bearer \(Self.appKey)"]) == 200)
            // A Supabase client's session token as the bearer, the key as apikey.
            #expect(
                try await create([.authorization: "Bearer eyJhbGciOiJIUzI1NiJ9.session", apikey: Self.appKey]) == 200)
            // Either header may hold this app's key, whatever key the other holds.
            #expect(try await create([.authorization: "Bearer key-for-another-app-999", apikey: Self.appKey]) == 200)
            #expect(
                try await create([.authorization: "Bearer \(Self.appKey)", apikey: "key-for-another-app-999"]) == 200)
        }
    }

    /// A key inside the app is public: anyone who reads it out may call what the app calls,
    /// but not post revenue that vendors receive, nor forward postbacks. Those need a key
    /// of `scope: backend` (or the older `shipped_in_app: false`).
    @Test func anAppsKeyReachesOnlyTheRoutesAnAppCalls() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let model = env.directory.appendingPathComponent("conversion-model.yaml")
        try SKAdNetworkEndToEndTests.model.write(to: model, atomically: true, encoding: .utf8)
        let (app, shipped) = ("app-key-0000000000000000", "shipped-key-000000000000")
        let (backend, notShipped) = ("backend-key-0000000000000", "not-shipped-key-00000000")
        let yaml =
            env.yaml().replacingOccurrences(
                of: "  iad: { enabled: true }",
                with: """
                      iad: { enabled: true }
                      skadnetwork: { conversion_model: \(model.path) }
                      s2s: { vendor: singular, vendors: { singular: { api_key: k, endpoint: "http://127.0.0.1:9" } } }
                    """) + """

                auth:
                  api_keys:
                    - { app_id: "1234567890", key: "\(app)" }
                    - { app_id: "1234567890", key: "\(shipped)", shipped_in_app: true }
                    - { app_id: "1234567890", key: "\(backend)", scope: backend }
                    - { app_id: "1234567890", key: "\(notShipped)", shipped_in_app: false }
                    - { app_id: "\(S2SEndToEndTests.appID)", key: "\(app)" }
                    - { app_id: "\(S2SEndToEndTests.appID)", key: "\(shipped)", shipped_in_app: true }
                    - { app_id: "\(S2SEndToEndTests.appID)", key: "\(backend)", scope: backend }
                    - { app_id: "\(S2SEndToEndTests.appID)", key: "\(notShipped)", shipped_in_app: false }
                """
        let configuration = try ConfigLoader.parse(yaml: yaml, file: "auth.yaml", environment: [:], registry: .builtIn)
        #expect(configuration.auth.apiKeys.map(\.scope).prefix(4) == [.app, .app, .backend, .backend])
        let gateway = try await Gateway.build(configuration: configuration)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            func post(_ uri: String, key: String, _ body: String) async throws -> TestResponse {
                try await client.execute(
                    uri: uri, method: .post, headers: [.authorization: "Bearer \(key)"], body: ByteBuffer(string: body))
            }
            let purchase = S2SEndToEndTests.event(
                "purchase", extra: #""revenue":99999.99,"currency":"USD","transaction_id":"2000000123456789""#)
            let postback =
                #"{"version":"4.0","ad-network-id":"n.skadnetwork","transaction-id":"t-1","#
                + #""app-id":1234567890,"attribution-signature":"AAAA"}"#
            for key in [app, shipped] {
                for (uri, body) in [("/v1/events", purchase), ("/v1/skadnetwork/postbacks", postback)] {
                    let refused = try await post(uri, key: key, body)
                    #expect(refused.status == .forbidden, "\(uri)")
                    let text = String(buffer: refused.body)
                    #expect(text.contains(#""code":"forbidden""#) && text.contains("backend API key"), "\(text)")
                }
                #expect(try await post("/v1/iad", key: key, IAdPayloads.attributed(user: key)).status == .accepted)
            }
            #expect(try await gateway.store.countRecords(matching: .init()) == 2)
            for key in [backend, notShipped] {
                let accepted = try await post("/v1/events", key: key, purchase)
                #expect(accepted.status.code < 300, "\(String(buffer: accepted.body))")
                #expect(try await post("/v1/iad", key: key, IAdPayloads.attributed(user: key)).status == .accepted)
            }
            #expect(try await post("/v1/skadnetwork/postbacks", key: backend, postback).status.code < 300)

            // The conversion-value route holds a request that names an app to its key's apps.
            func ask(_ query: String) async throws -> HTTPResponse.Status {
                try await client.execute(
                    uri: "/v1/skadnetwork/conversion-value?n=session" + query, method: .get,
                    headers: [.authorization: "Bearer \(app)"]
                ).status
            }
            #expect(try await ask("") == .ok)
            #expect(try await ask("&app_id=1234567890") == .ok)
            #expect(try await ask("&app_id=999") == .forbidden)
        }
    }

    @Test func aKeyListedWithTwoScopesOrContradictingItselfIsAConfigError() throws {
        let yaml = """
            auth:
              api_keys:
                - { app_id: "1", key: "same-key-0000000000000" }
                - { app_id: "2", key: "same-key-0000000000000", scope: backend }
                - { app_id: "3", key: "other-key-000000000000", scope: backend, shipped_in_app: true }
                - { app_id: "4", key: "third-key-000000000000", scope: admin }
            """
        #expect {
            try ConfigLoader.parse(yaml: yaml, file: "auth.yaml", environment: [:], registry: .builtIn)
        } throws: { error in
            let messages = (error as? ConfigError)?.issues.map(\.description) ?? []
            return messages.count == 3
                && messages.contains { $0.contains("auth.api_keys[1]: this key is listed with scope app too") }
                && messages.contains {
                    $0.contains("auth.api_keys[2].shipped_in_app: says scope app, but scope says backend")
                }
                && messages.contains { $0.contains("auth.api_keys[3].scope: must be one of app, backend") }
        }
    }

    @Test func shortOrMalformedKeysAreConfigErrors() throws {
        let yaml = """
            auth:
              api_keys:
                - { app_id: "1", key: "short" }
                - { app_id: "2", key_sha256: "xyz" }
                - { key: "long-enough-key-0000" }
            """
        #expect {
            try ConfigLoader.parse(yaml: yaml, file: "auth.yaml", environment: [:], registry: .builtIn)
        } throws: { error in
            let messages = (error as? ConfigError)?.issues.map(\.description) ?? []
            return messages.contains("auth.yaml:3:27: auth.api_keys[0].key: must be at least 16 characters")
                && !messages.joined().contains("\"short\"")
                && messages.contains { $0.contains("auth.api_keys[1].key_sha256: must be 64 hex digits") }
                && messages.contains { $0.contains("auth.api_keys[2].app_id: is required") }
        }
    }
}
