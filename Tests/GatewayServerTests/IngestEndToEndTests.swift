import Foundation
import GatewayCore
import GatewayServer
import GRDB
import Hummingbird
import HummingbirdTesting
import Testing

/// The whole way through the real HTTP server on loopback and a real SQLite file.
@Suite struct IngestEndToEndTests {
    struct Answer: Decodable {
        let record_id: String
        let status: String
        let duplicate_of: String?
    }

    struct ErrorAnswer: Decodable {
        struct Detail: Decodable {
            let code: String
            let message: String
            let field: String?
        }
        let error: Detail
    }

    @Test func iAdPayloadIsStoredDeliveredAndDeduplicated() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try env.configuration())
        let app = GatewayHTTP.makeApplication(gateway: gateway)

        try await app.test(.live) { client in
            let body = ByteBuffer(string: IAdPayloads.attributed(user: "user-42"))
            let first = try await client.execute(uri: "/v1/iad", method: .post, body: body)
            #expect(first.status == .accepted)
            let answer = try JSONDecoder().decode(Answer.self, from: Data(first.body.readableBytesView))
            #expect(answer.status == "accepted")

            let second = try await client.execute(uri: "/v1/iad", method: .post, body: body)
            #expect(second.status == .ok)
            let duplicate = try JSONDecoder().decode(Answer.self, from: Data(second.body.readableBytesView))
            #expect(duplicate.status == "duplicate")
            #expect(duplicate.duplicate_of == answer.record_id)

            #expect(try await env.eventually { try env.deliveredRecordIDs() == [answer.record_id] })
            let row = try gateway.sqlite!.pool.read { db in
                try Row.fetchOne(
                    db,
                    sql: """
                        SELECT keyword, keyword_id, campaign_name, campaign_id, ad_group_name, attributed,
                               click_date, conversion_date FROM attribution_records
                        """)
            }
            let stored = try #require(row)
            #expect(stored["keyword"] as String? == "meditation app")
            #expect(stored["keyword_id"] as Int64? == 87_675_432)
            #expect(stored["campaign_name"] as String? == "US Search - Meditation")
            #expect(stored["campaign_id"] as Int64? == 542_370_539)
            #expect(stored["ad_group_name"] as String? == "Exact - Core")
            #expect(stored["attributed"] as Int? == 1)
            #expect(stored["click_date"] as String? == "2020-08-04T17:18:07Z")
            #expect(stored["conversion_date"] as String? == "2020-08-04T17:19:41.250Z")

            // The duplicate left no second outbox row behind.
            let pending = try await gateway.store.outboxStats()
            #expect(pending["local"] == nil)
        }
    }

    /// A duplicate is answered from the record stored, not from the payload thrown away:
    /// an attributed dictionary posted after an organic one would otherwise be answered
    /// `attributed: true` while every sink and the report hold the organic record.
    @Test func aDuplicateIsAnsweredWithWhatWasStoredNotWithWhatWasThrownAway() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try env.configuration())
        let app = GatewayHTTP.makeApplication(gateway: gateway)
        struct Attributed: Decodable {
            let record_id: String
            let status: String
            let attributed: Bool
        }
        try await app.test(.live) { client in
            let organic = #"{"app_id":"1234567890","app_user_id":"user-7","Version3.1":{"iad-attribution":"false"}}"#
            let first = try await client.execute(uri: "/v1/iad", method: .post, body: ByteBuffer(string: organic))
            let stored = try JSONDecoder().decode(Attributed.self, from: Data(first.body.readableBytesView))
            #expect(first.status == .accepted && !stored.attributed)
            let later = ByteBuffer(string: IAdPayloads.attributed(user: "user-7"))
            let second = try await client.execute(uri: "/v1/iad", method: .post, body: later)
            let duplicate = try JSONDecoder().decode(Attributed.self, from: Data(second.body.readableBytesView))
            #expect(second.status == .ok && duplicate.status == "duplicate")
            #expect(duplicate.record_id == stored.record_id)
            #expect(!duplicate.attributed, "\(String(buffer: second.body))")
        }
    }

    @Test(
        arguments: [
            ("not json at all", 400, "malformed_json", nil),
            ("[1, 2]", 400, "malformed_json", nil),
            (#"{"app_id": "1", "app_user_id": "u"}"#, 422, "missing_field", "Version3.1"),
            (#"{"app_user_id": "u", "Version3.1": {"iad-attribution": "true"}}"#, 422, "missing_field", "app_id"),
            (
                #"{"app_id": "1", "app_user_id": "u", "Version3.1": {"iad-attribution": "true", "iad-campaign-id": "x"}}"#,
                422, "invalid_field", "Version3.1.iad-campaign-id"
            ),
            (#"{"app_id": "1", "app_user_id": "u", "Version3.1": "true"}"#, 422, "invalid_field", "Version3.1"),
        ] as [(String, Int, String, String?)])
    func badPayloadsGetAJSONErrorNamingTheProblem(body: String, status: Int, code: String, field: String?)
        async throws
    {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try env.configuration())
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            let response = try await client.execute(uri: "/v1/iad", method: .post, body: ByteBuffer(string: body))
            #expect(response.status.code == status)
            let error = try JSONDecoder().decode(ErrorAnswer.self, from: Data(response.body.readableBytesView))
            #expect(error.error.code == code)
            #expect(error.error.field == field)

            // The server is still up and answering.
            let health = try await client.execute(uri: "/healthz", method: .get)
            #expect(health.status == .ok)
        }
    }

    @Test func oversizedBodyIs413AndNothingIsStored() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try env.configuration())
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            let huge = ByteBuffer(string: String(repeating: "x", count: 200_000))
            let response = try await client.execute(uri: "/v1/iad", method: .post, body: huge)
            #expect(response.status == .contentTooLarge)
            let error = try JSONDecoder().decode(ErrorAnswer.self, from: Data(response.body.readableBytesView))
            #expect(error.error.code == "payload_too_large")
            #expect(try await gateway.store.outboxStats().isEmpty)
        }
    }

    @Test func deeplyNestedBodiesAreRefusedBeforeAnyFieldIsRead() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try env.configuration())
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            func nested(_ depth: Int) -> ByteBuffer {
                ByteBuffer(
                    string: #"{"app_id":"1","app_user_id":"u","Version3.1":"# + String(repeating: "[", count: depth)
                        + String(repeating: "]", count: depth) + "}")
            }
            let deep = try await client.execute(uri: "/v1/iad", method: .post, body: nested(40))
            #expect(deep.status == .badRequest)
            let error = try JSONDecoder().decode(ErrorAnswer.self, from: Data(deep.body.readableBytesView))
            #expect(error.error.code == "malformed_json" && error.error.message.contains("deeper than 32"))
            // Within the limit, the field itself is what is wrong.
            let shallow = try await client.execute(uri: "/v1/iad", method: .post, body: nested(20))
            #expect(shallow.status == .unprocessableContent)
            #expect(try await gateway.store.outboxStats().isEmpty)

            // A valid payload at the limit is stored inside `raw`, deeper than the limit, and
            // must still be read back and delivered.
            let atLimit =
                #"{"app_id":"1","app_user_id":"deep","Version3.1":{"iad-attribution":"false","x":"#
                + String(repeating: "[", count: 30) + String(repeating: "]", count: 30) + "}}"
            let stored = try await client.execute(uri: "/v1/iad", method: .post, body: ByteBuffer(string: atLimit))
            #expect(stored.status == .accepted)
            #expect(try await env.eventually { try env.deliveredRecordIDs().count == 1 })
            #expect(try await gateway.store.deadLetters(sink: nil, limit: 10).isEmpty)
        }
    }

    /// A page on another site cannot make the developer's browser post to a gateway on
    /// their machine: the browser says where the request comes from, and it is refused.
    @Test func aBrowsersWriteForAnotherSitesPageIsRefused() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try env.configuration())
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            func post(_ headers: HTTPFields, user: String) async throws -> TestResponse {
                try await client.execute(
                    uri: "/v1/iad", method: .post, headers: headers,
                    body: ByteBuffer(string: IAdPayloads.attributed(user: user)))
            }
            let site = HTTPFields.Element.Name("Sec-Fetch-Site")!
            for (headers, user) in [
                ([site: "cross-site"], "a"), ([site: "same-site", .origin: "https://evil.example"], "b"),
            ] as [(HTTPFields, String)] {
                let refused = try await post(headers, user: user)
                #expect(refused.status == .forbidden, "\(headers)")
                #expect(String(buffer: refused.body).contains(#""code":"forbidden""#))
            }
            #expect(try await gateway.store.countRecords(matching: .init()) == 0)
            // Its own pages, and every caller that is no browser, are served.
            #expect(try await post([site: "same-origin"], user: "e").status == .accepted)
            #expect(try await post([:], user: "f").status == .accepted)
            // An Origin alone is no browser's word: a proxy may rewrite Host.
            #expect(try await post([.origin: "https://gw.example"], user: "g").status == .accepted)
        }
    }

    @Test func unknownRouteAnswersTheJSONErrorShape() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try env.configuration())
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            let response = try await client.execute(uri: "/v1/nothing-here", method: .post)
            #expect(response.status == .notFound)
            let error = try JSONDecoder().decode(ErrorAnswer.self, from: Data(response.body.readableBytesView))
            #expect(error.error.code == "not_found")

            // A path served with another method is not "no route": the caller's method is
            // wrong, and `Allow` says which it should be.
            for (path, method, allow) in [
                ("/v1/iad", HTTPRequest.Method.get, "POST"), ("/v1/iad/", .put, "POST"),
                ("/metrics", .post, "GET, HEAD"), ("/readyz", .delete, "GET, HEAD"),
                ("/v1/users/forget/some-request", .post, "GET, HEAD"),
            ] {
                let wrong = try await client.execute(uri: path, method: method)
                #expect(wrong.status == .methodNotAllowed, "\(method) \(path)")
                #expect(wrong.headers[.allow] == allow, "\(method) \(path)")
                let answer = try JSONDecoder().decode(ErrorAnswer.self, from: Data(wrong.body.readableBytesView))
                #expect(answer.error.code == "method_not_allowed", "\(method) \(path)")
            }
            // A capture stands for one segment, not more.
            #expect(try await client.execute(uri: "/v1/users/forget/a/b", method: .post).status == .notFound)
        }
    }

    @Test func readinessAndMetricsReportTheGatewayState() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try env.configuration(paused: true))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            _ = try await client.execute(
                uri: "/v1/iad", method: .post, body: ByteBuffer(string: IAdPayloads.attributed(user: "a")))
            _ = try await client.execute(uri: "/v1/iad", method: .post, body: ByteBuffer(string: "{"))

            #expect(try await env.eventually { gateway.health.stoppedSinks.isEmpty })
            let ready = try await client.execute(uri: "/readyz", method: .get)
            #expect(ready.status == .ok)
            // Load balancers and uptime checks often probe with HEAD: the same status, no
            // body. An ingest route takes no HEAD (it would store nothing, and say so).
            for path in ["/healthz", "/readyz", "/metrics", "/openapi.yaml"] {
                let head = try await client.execute(uri: path, method: .head)
                #expect(head.status == .ok && head.body.readableBytes == 0, "\(path)")
            }
            #expect(try await client.execute(uri: "/v1/iad", method: .head).status == .methodNotAllowed)

            let metrics = try await client.execute(uri: "/metrics", method: .get)
            let text = String(buffer: metrics.body)
            #expect(text.contains(#"gateway_records_received_total{provider="iad"} 1"#))
            #expect(text.contains(#"gateway_records_rejected_total{provider="iad",code="malformed_json"} 1"#))
            // The sink is paused, so the record waits in its outbox.
            #expect(text.contains(#"gateway_outbox_depth{sink="local"} 1"#))
            // Series that alerts take increase() of exist from the start, at zero.
            #expect(text.contains(#"gateway_deliveries_total{sink="local",outcome="dead_letter"} 0"#))
            #expect(text.contains(#"gateway_deliveries_total{sink="local",outcome="declined"} 0"#))
            #expect(text.contains(#"gateway_deliveries_total{sink="local",outcome="postponed"} 0"#))
            #expect(text.contains(#"gateway_deliveries_total{sink="local",outcome="inline_fallback"} 0"#))
            #expect(text.contains(#"gateway_rate_limited_total{limit="connections_per_ip"} 0"#))
            #expect(text.contains(#"gateway_records_duplicate_total{provider="iad"} 0"#))
            #expect(text.contains(#"gateway_retention_removed_total{what="raw"} 0"#))
            #expect(text.contains("gateway_forget_requests_total 0"))
            // And the gateway's own faults, which IngestFailing takes rate() of.
            #expect(text.contains(#"gateway_records_rejected_total{provider="iad",code="storage_unavailable"} 0"#))
            #expect(text.contains(#"gateway_records_rejected_total{provider="iad",code="internal_error"} 0"#))
        }
    }
}

/// `server.noop_route` serves the benchmark's yardsticks; the iAd one must answer as
/// `/v1/iad` does and store nothing, or a benchmark would leave data behind.
@Suite struct NoopRouteTests {
    @Test func theUnstoredIAdRouteAnswersAsTheIAdRouteAndStoresNothing() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        var configuration = try env.configuration()
        configuration.server.noopRoute = true
        let gateway = try await Gateway.build(configuration: configuration)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            let body = ByteBuffer(string: IAdPayloads.attributed(user: "user-7"))
            let unstored = try await client.execute(uri: "/v1/noop/iad", method: .post, body: body)
            #expect(unstored.status == .accepted)
            let answer = try #require(try JSONValue.parse(Data(unstored.body.readableBytesView)).objectValue)
            #expect(answer["status"] == .string("accepted"))
            #expect(answer["provider"] == .string("iad"))
            #expect(answer["attributed"] == .bool(true))
            #expect(answer["record_id"]?.jsonText.count == 38)  // a UUID, quoted
            // The same body again is no duplicate: nothing was kept.
            let again = try await client.execute(uri: "/v1/noop/iad", method: .post, body: body)
            #expect(again.status == .accepted)
            let broken = try await client.execute(uri: "/v1/noop/iad", method: .post, body: ByteBuffer(string: "{"))
            #expect(broken.status == .badRequest)
        }
        #expect(try await gateway.store.countRecords(matching: ReplayFilter()) == 0)
    }

    @Test func withoutTheSettingThereIsNoSuchRoute() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try env.configuration())
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            let body = ByteBuffer(string: IAdPayloads.attributed(user: "user-7"))
            let response = try await client.execute(uri: "/v1/noop/iad", method: .post, body: body)
            #expect(response.status == .notFound)
        }
    }
}
