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
        let yaml = env.yaml() + """

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
        let yaml = env.yaml() + """

            auth:
              api_keys:
                - { app_id: "1234567890", key: "\(Self.appKey)" }
                - { app_id: "999", key: "key-for-another-app-999" }
            """
        let withSDK = yaml.replacingOccurrences(
            of: "  iad: { enabled: true }",
            with: "  iad: { enabled: true }\n  adservices: { enabled: true, sdk: { app_id: \"1234567890\" } }")
        let configuration = try ConfigLoader.parse(yaml: withSDK, file: "auth.yaml", environment: [:], registry: .builtIn)
        let gateway = try await Gateway.build(configuration: configuration)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client async throws in
            func create(_ headers: HTTPFields) async throws -> Int {
                Int(try await client.execute(
                    uri: "/functions/v1/create-user", method: .post, headers: headers, body: ByteBuffer(string: "{}")
                ).status.code)
            }
            let apikey = HTTPFields.Element.Name("apikey")!
            #expect(try await create([:]) == 401)
            #expect(try await create([apikey: "not-a-key-at-all-000"]) == 401)
            #expect(try await create([apikey: "key-for-another-app-999"]) == 403)
            #expect(try await create([apikey: Self.appKey]) == 200)
            #expect(try await create([.authorization: "Bearer \(Self.appKey)"]) == 200)
            // A Supabase client's session token as the bearer, the key as apikey.
            #expect(try await create([.authorization: "Bearer eyJhbGciOiJIUzI1NiJ9.session", apikey: Self.appKey]) == 200)
            // Either header may hold this app's key, whatever key the other holds.
            #expect(try await create([.authorization: "Bearer key-for-another-app-999", apikey: Self.appKey]) == 200)
            #expect(try await create([.authorization: "Bearer \(Self.appKey)", apikey: "key-for-another-app-999"]) == 200)
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
