import Foundation
import GatewayCore
import GatewayServer
import Hummingbird
import HummingbirdTesting
import Testing

/// `POST /v1/events` answers the conversion value for the app to set: the conversion
/// model's, or with Singular's `return_conversion_value` Singular's own answer to the
/// event's delivery, falling back to the model's when Singular is slow or down. Waits are
/// bounds with wide margins, never speed claims.
extension S2SEndToEndTests {
    /// The repository's example model: `trial_started` is fine value 1 (coarse medium),
    /// a purchase of 10 USD or more 40 (coarse high), the top of window 0.
    func conversionYAML(_ env: TestEnvironment, vendorPort: Int, singular: String = "") -> String {
        let model = FileManager.default.currentDirectoryPath + "/conversion-model.yaml"
        return yaml(env, vendorPort: vendorPort, vendor: "singular", singularExtra: singular)
            .replacingOccurrences(
                of: "providers:\n", with: "providers:\n  skadnetwork: { conversion_model: \(model) }\n")
    }

    /// SKAN fields of an app that first called SKAdNetwork an hour ago.
    static func skan(version: String? = nil) -> String {
        let now = Int(Date().timeIntervalSince1970)
        var fields =
            #""skan_conversion_value":0,"skan_first_call_timestamp":\#(now - 3600),"#
            + #""skan_last_call_timestamp":\#(now - 60)"#
        if let version { fields += #","skan_version":"\#(version)""# }
        return fields
    }

    func answer(_ response: TestResponse) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any])
    }

    func results(_ response: TestResponse) throws -> [[String: Any]] {
        try #require(try answer(response)["results"] as? [[String: Any]])
    }

    /// Posts a `trial_started` of an app on SKAN 3 and expects the model's value for it, 1.
    func expectTheModelsValue(_ client: TestClientProtocol) async throws {
        let response = try await post(client, Self.event("event", name: "trial_started", extra: Self.skan()))
        #expect(response.status == .accepted)
        let answer = try answer(response)
        #expect(answer["conversion_value"] as? Int == 1)
        #expect(answer["conversion_value_source"] as? String == "model")
    }

    @Test func anEventOfAnAppUsingSKANIsAnsweredTheModelsConversionValue() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        try await withGateway(vendors, env: env, yaml: { conversionYAML(env, vendorPort: $0) }) { client, _ in
            let body =
                "["
                + [
                    Self.event("event", name: "trial_started", extra: Self.skan()),
                    Self.event(
                        "purchase", user: "user-2",
                        extra: Self.skan(version: "4.0") + #","revenue":19.99,"currency":"USD""#),
                    Self.event("event", name: "trial_started", user: "user-3"),
                ].joined(separator: ",") + "]"
            let response = try await post(client, body)
            #expect(response.status == .accepted)
            let answers = try results(response)
            try #require(answers.count == 3)
            // SKAN 3: a fine value alone.
            #expect(answers[0]["conversion_value"] as? Int == 1)
            #expect(answers[0]["conversion_value_source"] as? String == "model")
            #expect(answers[0]["coarse_value"] == nil && answers[0]["lock_window"] == nil)
            // SKAN 4, first window: the top fine and coarse values, so the window may lock.
            #expect(answers[1]["conversion_value"] as? Int == 40)
            #expect(answers[1]["coarse_value"] as? String == "high")
            #expect(answers[1]["lock_window"] as? Bool == true)
            #expect(answers[1]["postback_sequence_index"] as? Int == 0)
            // No skan_* field: the app is taken not to use SKAdNetwork.
            #expect(answers[2]["conversion_value"] == nil && answers[2]["conversion_value_source"] == nil)
            #expect(try await env.eventually { vendors.accepted("singular").count == 3 })

            // Windows count from the first call: SKAN 4 without it names the field.
            let refused = try await post(
                client, Self.event("event", name: "trial_started", extra: #""skan_version":"4.0""#))
            #expect(refused.status == .unprocessableContent)
            let error = try #require(try answer(refused)["error"] as? [String: Any])
            #expect(error["field"] as? String == "skan_first_call_timestamp")
        }
    }

    @Test func singularsConversionValueIsPassedOnWhenItAnswersInTime() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        vendors.singularSKANAnswer.withLock {
            $0 = #""conversion_value":7,"skan_updated_coarse_value":1,"skan_updated_lock_window_value":false"#
        }
        let singular = "\n        return_conversion_value: true\n        answer_wait_ms: 30000"
        try await withGateway(
            vendors, env: env, yaml: { conversionYAML(env, vendorPort: $0, singular: singular) }
        ) { client, _ in
            let response = try await post(
                client, Self.event("event", name: "trial_started", extra: Self.skan(version: "4.0")))
            #expect(response.status == .accepted)
            let answer = try answer(response)
            #expect(answer["conversion_value"] as? Int == 7)
            #expect(answer["coarse_value"] as? String == "medium")
            #expect(answer["lock_window"] as? Bool == false)
            #expect(answer["conversion_value_source"] as? String == "singular")
            #expect(vendors.accepted("singular").count == 1)
        }
    }

    @Test func aSlowSingularIsAnsweredTheModelsValueAndGetsTheEventOnce() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        vendors.singularSKANAnswer.withLock { $0 = #""conversion_value":7"# }
        vendors.holdSingular.withLock { $0 = true }
        let singular = "\n        return_conversion_value: true\n        answer_wait_ms: 200"
        try await withGateway(
            vendors, env: env, yaml: { conversionYAML(env, vendorPort: $0, singular: singular) }
        ) { client, gateway in
            try await expectTheModelsValue(client)
            // Singular holds the event it was sent; released, it answers, and that is all.
            #expect(try await env.eventually { vendors.accepted("singular").count == 1 })
            vendors.holdSingular.withLock { $0 = false }
            #expect(try await env.eventually { try await gateway.store.outboxStats()["s2s.singular"] == nil })
            #expect(vendors.accepted("singular").count == 1)
            #expect(try await gateway.store.deadLetters(sink: "s2s.singular", limit: 10).isEmpty)
        }
    }

    @Test func singularDownIsAnsweredTheModelsValueAndTheEventStaysQueued() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        let singular = "\n        return_conversion_value: true\n        timeout_ms: 500"
        // Nothing listens on port 9: Singular cannot be reached.
        try await withGateway(
            vendors, env: env, yaml: { _ in conversionYAML(env, vendorPort: 9, singular: singular) }
        ) { client, gateway in
            try await expectTheModelsValue(client)
            #expect(try await gateway.store.outboxStats()["s2s.singular"]?.depth == 1)
            #expect(try await gateway.store.deadLetters(sink: "s2s.singular", limit: 10).isEmpty)
        }
    }
}
