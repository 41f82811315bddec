import Foundation
import GatewayConfig
import GatewayCore
import GatewayServer
import Hummingbird
import HummingbirdTesting
import Testing

/// A forget request reaching the S2S vendors: AppsFlyer's OpenDSR API and Adjust's data
/// erasure API, local fakes that check the requests as the vendors document them.
@Suite struct VendorForgetEndToEndTests {
    @Test func theVendorsAreAskedToEraseEveryIdTheGatewayHeld() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        let deletions = FakeVendorDeletions()
        let local = ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0))
        try await Application(router: vendors.router(), configuration: local).test(.live) { vendorClient in
            try await Application(
                router: deletions.router(adjustAppToken: FakeVendors.adjustAppToken), configuration: local
            ).test(.live) { deletionClient in
                let vendorPort = try #require(vendorClient.port)
                let deletionPort = try #require(deletionClient.port)
                let yaml = """
                    server: { host: 127.0.0.1, port: 0, max_body_bytes: 65536, log_level: warning }
                    storage: { sqlite: { path: \(env.databasePath), durability: normal } }
                    auth:
                      api_keys:
                        - { app_id: "\(S2SEndToEndTests.appID)", key: "\(ForgetEndToEndTests.backendKey)", scope: backend }
                    providers:
                      s2s:
                        vendor: [appsflyer, adjust, singular]
                        vendors:
                          singular:
                            api_key: \(FakeVendors.singularKey)
                            endpoint: http://127.0.0.1:\(vendorPort)
                            gdpr_api_key: \(FakeVendorDeletions.singularKey)
                            gdpr_endpoint: http://127.0.0.1:\(deletionPort)
                          appsflyer:
                            api_key: \(FakeVendors.appsFlyerKey)
                            endpoint: http://127.0.0.1:\(vendorPort)
                            gdpr_api_token: \(FakeVendorDeletions.appsFlyerToken)
                            gdpr_endpoint: http://127.0.0.1:\(deletionPort)
                            backoff_initial_ms: 10
                            backoff_max_ms: 50
                          adjust:
                            api_key: \(FakeVendors.adjustToken)
                            endpoint: http://127.0.0.1:\(vendorPort)/
                            gdpr_endpoint: http://127.0.0.1:\(deletionPort)
                            environment: sandbox
                            backoff_initial_ms: 10
                            backoff_max_ms: 50
                            apps:
                              "\(S2SEndToEndTests.appID)":
                                app_token: \(FakeVendors.adjustAppToken)
                                event_tokens: { purchase: pur987, level_up: lvl654 }
                    sinks:
                      local: { type: sqlite, backoff_initial_ms: 10, backoff_max_ms: 100 }
                    """
                let config = try ConfigLoader.parse(
                    yaml: yaml, file: "vendors.yaml", environment: [:], registry: .builtIn)
                let gateway = try await Gateway.build(configuration: config)
                try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
                    let purchase = S2SEndToEndTests.event(
                        "purchase", extra: #""revenue":9.99,"currency":"USD","transaction_id":"2000000999""#)
                    let posted = try await client.execute(
                        uri: "/v1/events", method: .post,
                        headers: ForgetEndToEndTests.bearer(ForgetEndToEndTests.backendKey),
                        body: ByteBuffer(string: purchase))
                    #expect(posted.status == .accepted)
                    #expect(
                        try await env.eventually {
                            !vendors.accepted("appsflyer").isEmpty && !vendors.accepted("adjust").isEmpty
                        })

                    let accepted = try await client.execute(
                        uri: "/v1/users/forget", method: .post,
                        headers: ForgetEndToEndTests.bearer(ForgetEndToEndTests.backendKey),
                        body: ByteBuffer(string: #"{"app_id":"\#(S2SEndToEndTests.appID)","app_user_id":"user-1"}"#))
                    #expect(accepted.status == .accepted)
                    let requestID = try #require(try ForgetEndToEndTests.json(accepted)["request_id"] as? String)
                    var sinks: [String: [String: Any]] = [:]
                    #expect(
                        try await env.eventually {
                            let response = try await client.execute(
                                uri: "/v1/users/forget/\(requestID)", method: .get,
                                headers: ForgetEndToEndTests.bearer(ForgetEndToEndTests.backendKey))
                            let status = try ForgetEndToEndTests.json(response)
                            sinks = status["sinks"] as? [String: [String: Any]] ?? [:]
                            return status["status"] as? String == "done"
                        })
                    #expect(
                        sinks.mapValues { $0["status"] as? String } == [
                            "local": "done", "s2s.appsflyer": "done", "s2s.adjust": "done",
                            "s2s.singular": "done",
                        ])
                }
            }
        }
        #expect(deletions.refused.isEmpty, "\(deletions.refused)")
        let appsFlyer = try #require(deletions.accepted("appsflyer").first)
        let body = try #require(appsFlyer.body)
        #expect(body["property_id"] as? String == "id\(S2SEndToEndTests.appID)")
        #expect(
            Self.identities(body) == [
                "appsflyer_id:1700000000000-1234567", "idfv:\(S2SEndToEndTests.idfv)",
                "ios_advertising_id:\(S2SEndToEndTests.idfa)", "customer_user_id:user-1",
            ])
        let singular = try #require(deletions.accepted("singular").first?.body)
        #expect(singular["subject_request_id"] as? String != nil)
        #expect(
            Self.identities(singular) == [
                "ios_vendor_id:\(S2SEndToEndTests.idfv)", "ios_advertising_id:\(S2SEndToEndTests.idfa)",
                "user_id:user-1",
            ])
        let adjust = deletions.accepted("adjust")
        #expect(
            Set(adjust.map { $0.query["idfv"] ?? $0.query["idfa"] ?? "" }) == [
                S2SEndToEndTests.idfv, S2SEndToEndTests.idfa,
            ])
        #expect(adjust.allSatisfy { $0.authorization == "Bearer \(FakeVendors.adjustToken)" })
    }

    /// An OpenGDPR body's `subject_identities` as `type:value`.
    static func identities(_ body: [String: Any]) -> Set<String> {
        Set(
            (body["subject_identities"] as? [[String: Any]] ?? []).map {
                "\($0["identity_type"] as? String ?? ""):\($0["identity_value"] as? String ?? "")"
            })
    }
}
