import Crypto
import Foundation
import GatewayConfig
import GatewayCore
import GatewayServer
@testable import GatewayStorage
import GRDB
import Hummingbird
import HummingbirdTesting
import Testing

/// `POST /v1/events` and the vendor callbacks through the real server and SQLite, with
/// local fakes of Singular, AppsFlyer and Adjust that check requests as the vendors do.
/// Waits are bounds for work to finish, never speed claims.
@Suite struct S2SEndToEndTests {
    static let appID = "123456789"
    static let idfv = "6D92078A-8246-4BA4-AE5B-76104861E7DC"
    static let idfa = "A1B2C3D4-1111-2222-3333-444455556666"
    static let zeroIDFA = "00000000-0000-0000-0000-000000000000"
    static let token = Data("adservices-token-for-singular".utf8).base64EncodedString()
    static let callbackSecret = "callback-secret-0123456789"

    /// A minute ago, in the ISO-8601 the events carry (Adjust refuses events older than 58 days).
    static var recently: String { ISO8601.format(Date().addingTimeInterval(-60)) }

    func yaml(_ env: TestEnvironment, vendorPort: Int, vendor: String, singularExtra: String = "") -> String {
        """
        server: { host: 127.0.0.1, port: 0, max_body_bytes: 65536, log_level: warning }
        storage: { sqlite: { path: \(env.databasePath), durability: normal } }
        providers:
          s2s:
            vendor: \(vendor)
            vendors:
              singular:
                api_key: \(FakeVendors.singularKey)
                endpoint: http://127.0.0.1:\(vendorPort)
                backoff_initial_ms: 10
                backoff_max_ms: 50
                max_attempts: 1000\(singularExtra)
              appsflyer:
                api_key: \(FakeVendors.appsFlyerKey)
                endpoint: http://127.0.0.1:\(vendorPort)
                backoff_initial_ms: 10
                backoff_max_ms: 50
                callback_secret: \(Self.callbackSecret)
              adjust:
                api_key: \(FakeVendors.adjustToken)
                endpoint: http://127.0.0.1:\(vendorPort)/
                environment: sandbox
                backoff_initial_ms: 10
                backoff_max_ms: 50
                callback_secret: \(Self.callbackSecret)
                apps:
                  "\(Self.appID)":
                    app_token: \(FakeVendors.adjustAppToken)
                    event_tokens: { purchase: pur987, level_up: lvl654 }
        sinks:
          local: { type: sqlite, backoff_initial_ms: 10, backoff_max_ms: 100 }
        """
    }

    /// Runs `body` with the fake vendors and a gateway configured by `yaml`.
    func withGateway(
        _ vendors: FakeVendors, env: TestEnvironment, yaml: @escaping @Sendable (Int) -> String,
        _ body: @escaping @Sendable (TestClientProtocol, Gateway) async throws -> Void
    ) async throws {
        try await Application(router: vendors.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            .test(.live) { vendorClient in
                let port = try #require(vendorClient.port)
                let config = try ConfigLoader.parse(
                    yaml: yaml(port), file: "s2s.yaml", environment: [:], registry: .builtIn)
                let gateway = try await Gateway.build(configuration: config)
                try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
                    try await body(client, gateway)
                }
            }
    }

    static func event(
        _ type: String, name: String? = nil, user: String = "user-1", idfv: String = idfv, idfa: String? = idfa,
        att: Int? = 3, os: String = "18.1", extra: String = ""
    ) -> String {
        var fields = [
            #""type":"\#(type)""#, #""app_id":"\#(appID)""#, #""bundle_id":"com.example.meditate""#,
            #""app_user_id":"\#(user)""#, #""idfv":"\#(idfv)""#, #""ip":"203.0.113.7""#,
            #""user_agent":"Meditate/1.0 CFNetwork/1.0 Darwin/24.0.0""#, #""os_version":"\#(os)""#,
            #""device_model":"iPhone16,2""#, #""locale":"en_US""#, #""timestamp":"\#(recently)""#,
            #""vendor_ids":{"appsflyer_id":"1700000000000-1234567"}"#,
        ]
        if let name { fields.append(#""name":"\#(name)""#) }
        if let att { fields.append(#""att_status":\#(att)"#) }
        if let idfa { fields.append(#""idfa":"\#(idfa)""#) }
        if !extra.isEmpty { fields.append(extra) }
        return "{" + fields.joined(separator: ",") + "}"
    }

    /// A session with the AdServices token, a named event and a purchase.
    static var threeEvents: String {
        "["
            + [
                event("session", extra: #""adservices_token":"\#(token)""#),
                event("event", name: "level_up", extra: #""properties":{"level":7}"#),
                event("purchase", extra: #""revenue":9.99,"currency":"USD","transaction_id":"2000000123456789""#),
            ].joined(separator: ",") + "]"
    }

    func post(_ client: TestClientProtocol, _ body: String, uri: String = "/v1/events") async throws -> TestResponse {
        try await client.execute(uri: uri, method: .post, body: ByteBuffer(string: body))
    }

    /// Rows of the SQLite sink: kind, idfa and raw per record id.
    func sinkRows(_ env: TestEnvironment) throws -> [String: (kind: String, idfa: String?, raw: String)] {
        let queue = try DatabaseQueue(path: env.databasePath)
        return try queue.read { db in
            guard try db.tableExists("attribution_records") else { return [:] }
            var rows: [String: (String, String?, String)] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT record_id, kind, idfa, raw FROM attribution_records") {
                rows[row["record_id"]] = (row["kind"], row["idfa"], row["raw"])
            }
            return rows
        }
    }

    @Test(arguments: ["singular", "appsflyer", "adjust"])
    func eachVendorGetsTheLaunchEventAndPurchaseAsItExpects(vendor: String) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        try await withGateway(vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: vendor) }) { client, _ in
            let response = try await post(client, Self.threeEvents)
            #expect(response.status == .accepted)
            // AppsFlyer's S2S API takes in-app events only.
            let expected = vendor == "appsflyer" ? 2 : 3
            #expect(try await env.eventually { vendors.accepted(vendor).count == expected })
            #expect(try await env.eventually { try sinkRows(env).count == 3 })
            #expect(Set(try sinkRows(env).values.map(\.kind)) == ["session", "event", "purchase"])
            let seen = vendors.accepted(vendor)
            #expect(vendors.accepted.count == expected, "only the configured vendor hears of the events")
            #expect(vendors.refused.isEmpty)
            switch vendor {
            case "singular":
                let launch = try #require(seen.first { $0.path == "/api/v1/launch" })
                #expect(launch.parameters["attribution_token"] == Self.token)
                #expect(launch.parameters["i"] == "com.example.meditate")
                #expect(launch.parameters["att_authorization_status"] == "3")
                let purchase = try #require(seen.first { $0.parameters["n"] == "__iap__" })
                #expect(purchase.parameters["amt"] == "9.99" && purchase.parameters["cur"] == "USD")
                #expect(purchase.parameters["is_revenue_event"] == "true")
                #expect(purchase.parameters["purchase_transaction_id"] == "2000000123456789")
                let event = try #require(seen.first { $0.parameters["n"] == "level_up" })
                #expect(event.parameters["e"] == #"{"level":7}"#)
            case "appsflyer":
                #expect(seen.allSatisfy { $0.parameters["app"] == "id\(Self.appID)" })
                let purchase = try #require(seen.first { $0.parameters["eventName"] == "af_purchase" })
                let value = try #require(purchase.parameters["eventValue"])
                #expect(value.contains(#""af_revenue":"9.99""#) && value.contains(#""af_currency":"USD""#))
                #expect(purchase.parameters["eventCurrency"] == "USD")
                #expect(purchase.parameters["customer_user_id"] == "user-1")
            default:
                let session = try #require(seen.first { $0.path == "/session" })
                #expect(session.headers["x-adjust-forwarded-for"] == "203.0.113.7")
                #expect(session.parameters["environment"] == "sandbox")
                let purchase = try #require(seen.first { $0.parameters["event_token"] == "pur987" })
                #expect(purchase.parameters["revenue"] == "9.99" && purchase.parameters["currency"] == "USD")
                #expect(seen.contains { $0.parameters["event_token"] == "lvl654" })
            }
        }
    }

    @Test func switchingTheVendorIsOneWordOfConfigAndARestart() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        // The two configurations differ in the `vendor:` line only.
        let lines = { (port: Int, vendor: String) in yaml(env, vendorPort: port, vendor: vendor).split(separator: "\n")
        }
        let differing = zip(lines(1, "singular"), lines(1, "adjust")).filter { $0 != $1 }
        #expect(differing.count == 1 && differing[0].0.contains("vendor: singular"))

        try await withGateway(vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: "singular") }) {
            client, _ async throws in
            #expect(try await post(client, Self.threeEvents).status == .accepted)
            #expect(try await env.eventually { vendors.accepted("singular").count == 3 })
        }
        let later = "[" + Self.event("event", name: "level_up", user: "user-2") + "]"
        try await withGateway(vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: "adjust") }) {
            client, _ async throws in
            #expect(try await post(client, later).status == .accepted)
            #expect(try await env.eventually { vendors.accepted("adjust").count == 1 })
            #expect(vendors.accepted("singular").count == 3)
        }
    }

    @Test func anArrayIsAnsweredWithResultsWhateverItsLengthAndAnObjectAlone() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        try await withGateway(vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: "singular") }) { client, _ in
            let answer = { (body: String) async throws -> [String: Any] in
                let response = try await post(client, body)
                return try #require(
                    try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any])
            }
            let one = Self.event("event", name: "level_up", extra: #""event_id":"one""#)
            // A client batching what it has sends one event as often as many.
            for body in ["[\(one)]", " \n[\(one)]", "\u{FEFF}[\(one)]"] {
                let results = try #require(try await answer(body)["results"] as? [[String: Any]], "\(body)")
                #expect(results.count == 1)
                #expect(results.first?["record_id"] is String)
            }
            let two = Self.event("event", name: "level_up", extra: #""event_id":"two""#)
            let alone = try await answer(two)
            #expect(alone["results"] == nil)
            #expect(alone["status"] as? String == "accepted")
        }
    }

    @Test func anIDFAReachesStorageSinksAndVendorsOnlyWithConsent() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        let denied = "D0D0D0D0-2222-2222-2222-222222222222"
        let allowed = "A0A0A0A0-3333-3333-3333-333333333333"
        let body =
            "["
            + [
                Self.event(
                    "event", name: "level_up", user: "denied", idfv: "11111111-1111-1111-1111-111111111111",
                    idfa: denied, att: 2),
                Self.event(
                    "event", name: "level_up", user: "allowed", idfv: "22222222-2222-2222-2222-222222222222",
                    idfa: allowed, att: 3),
                Self.event(
                    "event", name: "level_up", user: "zeros", idfv: "33333333-3333-3333-3333-333333333333",
                    idfa: Self.zeroIDFA, att: 3),
            ].joined(separator: ",") + "]"
        try await withGateway(
            vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: "[singular, appsflyer, adjust]") }
        ) {
            client, gateway in
            let response = try await post(client, body)
            #expect(response.status == .accepted)
            struct Results: Decodable { struct R: Decodable { let record_id: String }; let results: [R] }
            let ids = try JSONDecoder().decode(Results.self, from: Data(response.body.readableBytesView)).results.map(
                \.record_id)
            #expect(ids.count == 3)

            // Storage.
            let stored = try await ids.asyncMap { try #require(try await gateway.store.record(id: $0)) }
            #expect(stored.map(\.idfa) == [nil, allowed, nil])
            #expect(stored.map(\.attStatus) == [2, 3, 3])
            for record in stored {
                let raw = record.raw?.jsonText ?? ""
                #expect(!raw.contains(denied) && !raw.contains(Self.zeroIDFA))
            }
            // The SQLite sink.
            #expect(try await env.eventually { try sinkRows(env).count == 3 })
            let rows = try sinkRows(env)
            #expect(ids.map { rows[$0]?.idfa } == [nil, allowed, nil])
            #expect(rows.values.allSatisfy { !$0.raw.contains(denied) && !$0.raw.contains(Self.zeroIDFA) })
            // Every vendor: each got all three, and only the allowed IDFA.
            #expect(try await env.eventually { vendors.accepted.count == 9 })
            for seen in vendors.accepted {
                #expect(!seen.rawText.contains(denied) && !seen.rawText.contains(Self.zeroIDFA), "\(seen.vendor)")
                let user = seen.parameters["custom_user_id"] ?? seen.parameters["customer_user_id"]
                let idfa = seen.parameters["idfa"]
                if seen.vendor != "adjust" { #expect(idfa == (user == "allowed" ? allowed : nil), "\(seen.vendor)") }
            }
            let adjust = vendors.accepted("adjust")
            #expect(adjust.filter { $0.parameters["idfa"] == allowed }.count == 1)
            #expect(adjust.filter { $0.parameters["idfa"] != nil }.count == 1)
            #expect(Set(adjust.compactMap { $0.parameters["att_status"] }) == ["2", "3"])
        }
    }

    @Test func requireConsentKeepsOtherEventsFromThatVendorButStoresThem() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        // One device: its events go in order, so the consented one arriving means the
        // other was not sent.
        let body =
            "["
            + [
                Self.event("event", name: "level_up", user: "u", att: 2),
                Self.event("event", name: "level_up", user: "u", att: 3, extra: #""properties":{"second":true}"#),
            ].joined(separator: ",") + "]"
        let yaml: @Sendable (Int) -> String = { port in
            self.yaml(env, vendorPort: port, vendor: "singular", singularExtra: "\n        require_consent: true")
        }
        try await withGateway(vendors, env: env, yaml: yaml) { client, _ async throws in
            #expect(try await post(client, body).status == .accepted)
            #expect(try await env.eventually { vendors.accepted("singular").count == 1 })
            #expect(vendors.accepted("singular")[0].parameters["att_authorization_status"] == "3")
            #expect(try await env.eventually { try sinkRows(env).count == 2 })
        }
    }

    /// iOS before 14.5 had no ATT: an event from it without a status has the consent the
    /// rules allow, one from a later iOS without a status has none.
    @Test func requireConsentForwardsEventsWithoutAStatusFromBeforeATT() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        // One device, in order: the last one's arrival means the others were decided.
        let events = [
            Self.event("event", name: "old_ios", user: "u", idfa: nil, att: nil, os: "14.4.1"),
            Self.event("event", name: "new_ios", user: "u", idfa: nil, att: nil, os: "14.5"),
            Self.event("event", name: "old_ios_denied", user: "u", idfa: nil, att: 2, os: "13.7"),
            Self.event("event", name: "no_version", user: "u", idfa: nil, att: nil, os: "unknown"),
            Self.event("event", name: "consented", user: "u", att: 3),
        ]
        let body = "[" + events.joined(separator: ",") + "]"
        let yaml: @Sendable (Int) -> String = { port in
            self.yaml(env, vendorPort: port, vendor: "singular", singularExtra: "\n        require_consent: true")
        }
        try await withGateway(vendors, env: env, yaml: yaml) { client, _ async throws in
            #expect(try await post(client, body).status == .accepted)
            let sent = { vendors.accepted("singular").map { $0.parameters["n"] } }
            #expect(try await env.eventually { sent().contains("consented") })
            #expect(sent() == ["old_ios", "consented"])
            #expect(try await env.eventually { try sinkRows(env).count == 5 })
        }
    }

    /// A vendor's refusal is kept as the dead letter's reason (shown by `dlq list`, logged):
    /// an error page quoting the request must not put the vendor's key there, in a header
    /// (AppsFlyer, Adjust) or in the URL's query (Singular).
    @Test(arguments: ["singular", "appsflyer", "adjust"])
    func aRefusalQuotingTheRequestKeepsNoKeyInTheDeadLetter(vendor: String) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        vendors.echoes.withLock { $0 = 1 }
        let key = [
            "singular": FakeVendors.singularKey, "appsflyer": FakeVendors.appsFlyerKey,
            "adjust": FakeVendors.adjustToken,
        ][vendor]!
        try await withGateway(vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: vendor) }) {
            client, gateway in
            #expect(try await post(client, Self.event("event", name: "level_up")).status == .accepted)
            #expect(
                try await env.eventually {
                    try await !gateway.store.deadLetters(sink: "s2s.\(vendor)", limit: 10).isEmpty
                })
            let reason = try #require(
                try await gateway.store.deadLetters(sink: "s2s.\(vendor)", limit: 10).first?.error)
            // The page was kept, and the key taken out of it.
            #expect(reason.contains("answered 400") && reason.contains("<key>"), "\(reason)")
            #expect(!reason.contains(key), "\(reason)")
        }
    }

    @Test func aVendorOutageDelaysEventsAndLosesNoneNorSendsOneTwice() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        vendors.outage.withLock { $0 = 40 }
        let body =
            "["
            + (0..<20).map { index in
                Self.event(
                    "event", name: "level_up", user: "user-\(index)", idfv: UUID().uuidString,
                    extra: #""properties":{"seq":\#(index)}"#)
            }.joined(separator: ",") + "]"
        try await withGateway(vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: "singular") }) {
            client, gateway in
            #expect(try await post(client, body).status == .accepted)
            #expect(try await env.eventually { vendors.outage.withLock { $0 } == 0 })
            #expect(try await env.eventually { vendors.accepted("singular").count == 20 })
            let sequences = vendors.accepted("singular").compactMap { $0.parameters["e"] }
            #expect(Set(sequences).count == 20)
            #expect(try await gateway.store.deadLetters(sink: "s2s.singular", limit: 10).isEmpty)
            // Nothing further arrives: each was sent once.
            try await Task.sleep(for: .milliseconds(300))
            #expect(vendors.accepted("singular").count == 20)
        }
    }

    /// Restoring a backup brings back its outboxes as they stood. A vendor counts every
    /// event it is sent (none deduplicates), and the original store may have sent these
    /// after the backup: the restored store must not send them again unasked.
    @Test func aRestoredBackupSendsVendorsNothingAgainUnasked() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        vendors.outage.withLock { $0 = 1_000_000 }
        let copy = env.directory.appendingPathComponent("restored.sqlite").path
        let body =
            "["
            + (0..<3).map { Self.event("event", name: "level_up", user: "user-\($0)", idfv: UUID().uuidString) }
            .joined(separator: ",") + "]"
        try await withGateway(vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: "singular") }) {
            client, gateway in
            #expect(try await post(client, body).status == .accepted)
            #expect(try await env.eventually { try await gateway.store.outboxStats()["s2s.singular"]?.depth == 3 })
            _ = try StoreBackup.copy(gateway.sqlite!, to: copy)
            _ = try StoreBackup.copy(gateway.sqlite!, to: copy + ".2")
        }
        // A first start whose config leaves the vendor out cannot tell what its outbox is
        // for: it is dead-lettered too, or the next start, with the vendor, sent it again.
        let cautious = try ConfigLoader.parse(
            yaml: "storage: { sqlite: { path: \(copy).2, durability: normal } }\nsinks:\n  local: { type: sqlite }\n",
            file: "cautious.yaml", environment: [:], registry: .builtIn)
        let first = try await Gateway.build(configuration: cautious)
        #expect(try await first.store.deadLetters(sink: "s2s.singular", limit: 10).count == 3)
        #expect(try await first.store.outboxStats()["s2s.singular"] == nil)
        #expect(try await first.store.outboxStats()["local"] == nil, "delivered inline before the backup")
        vendors.outage.withLock { $0 = 0 }
        let restored: @Sendable (Int) -> String = { port in
            yaml(env, vendorPort: port, vendor: "singular").replacingOccurrences(of: env.databasePath, with: copy)
        }
        try await withGateway(vendors, env: env, yaml: restored) { client, gateway in
            let letters = try await gateway.store.deadLetters(sink: "s2s.singular", limit: 10)
            #expect(letters.count == 3)
            #expect(letters.allSatisfy { $0.error.contains("restored from a backup taken at") })
            #expect(try await gateway.store.outboxStats()["s2s.singular"] == nil)
            // New events go out as ever.
            let later = "[" + Self.event("event", name: "level_up", user: "user-9", idfv: UUID().uuidString) + "]"
            #expect(try await post(client, later).status == .accepted)
            #expect(try await env.eventually { vendors.accepted("singular").count == 1 })
        }
        // Only the first start on the copy is a restore: what the operator retries goes out.
        try await withGateway(vendors, env: env, yaml: restored) { _, gateway async throws in
            #expect(try await gateway.store.retryDeadLetters(ids: nil, sink: "s2s.singular", now: Date()) == 3)
            gateway.workers.first { $0.sinkName == "s2s.singular" }?.wake()
            #expect(try await env.eventually { vendors.accepted("singular").count == 4 })
        }
    }

    /// Killed mid-batch, the gateway must not send a vendor again the events it had
    /// answered and counted. Each is marked before its request and settled at its
    /// answer; one found still marked after a restart may have been counted, and is
    /// dead-lettered rather than sent again.
    @Test func anEventTheGatewayStoppedWhileSendingIsNotSentAgainUnasked() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        vendors.outage.withLock { $0 = 1_000_000 }
        let body =
            "["
            + (0..<2).map { Self.event("event", name: "level_up", user: "user-\($0)", idfv: UUID().uuidString) }
            .joined(separator: ",") + "]"
        try await withGateway(vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: "singular") }) {
            (client: TestClientProtocol, gateway: Gateway) async throws in
            #expect(try await post(client, body).status == .accepted)
            #expect(try await env.eventually { try await gateway.store.outboxStats()["s2s.singular"]?.depth == 2 })
        }
        // As a kill leaves it: the first event's request was out, its answer not written.
        let queue = try DatabaseQueue(path: env.databasePath)
        try await queue.write { db in
            try db.execute(
                sql:
                    "UPDATE outbox SET sending_since = 1 WHERE id = (SELECT MIN(id) FROM outbox WHERE sink = 's2s.singular')"
            )
        }
        vendors.outage.withLock { $0 = 0 }
        try await withGateway(vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: "singular") }) {
            (_: TestClientProtocol, gateway: Gateway) async throws in
            #expect(try await env.eventually { vendors.accepted("singular").count == 1 })
            // Written with the rest of the batch, after the other event's answer.
            #expect(
                try await env.eventually {
                    try await gateway.store.deadLetters(sink: "s2s.singular", limit: 10).count == 1
                })
            let letters = try await gateway.store.deadLetters(sink: "s2s.singular", limit: 10)
            #expect(
                letters.first?.error.contains(
                    "the gateway stopped before its answer was written: it may have counted it") == true)
            #expect(try await gateway.store.outboxStats()["s2s.singular"] == nil)
            try await Task.sleep(for: .milliseconds(200))
            #expect(vendors.accepted("singular").count == 1)
        }
    }

    /// The outbound pool does not cap a vendor's `concurrency` at AsyncHTTPClient's 8
    /// connections per host: past it, requests (or those of vendors behind one proxy) would
    /// queue for one while their timeout ran, and events the vendor answered in time would
    /// be dead-lettered. Singular here holds each request until 16 are open at once.
    @Test func aVendorsConcurrencyIsNotCappedByTheConnectionPool() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        vendors.openAtOnce.withLock { $0 = 16 }
        let body =
            "["
            + (0..<16).map { Self.event("event", name: "level_up", user: "user-\($0)", idfv: UUID().uuidString) }
            .joined(separator: ",") + "]"
        let extra = "\n        concurrency: 16\n        timeout_ms: 30000"
        try await withGateway(
            vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: "singular", singularExtra: extra) }
        ) {
            (client: TestClientProtocol, gateway: Gateway) async throws in
            #expect(try await post(client, body).status == .accepted)
            #expect(try await env.eventually { try await gateway.store.outboxStats()["s2s.singular"] == nil })
            #expect(vendors.accepted("singular").count == 16)
            #expect(vendors.mostOpen == 16)
            #expect(try await gateway.store.deadLetters(sink: "s2s.singular", limit: 20).isEmpty)
        }
    }

    /// A vendor refusing everything without `Retry-After` is not sent every event of the
    /// batch, each to be refused: once one answer is such a refusal, the batch's events not
    /// sent yet wait, no attempt counted.
    @Test func aVendorRefusingEverythingIsNotSentTheRestOfTheBatch() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        let outage = 1_000_000
        vendors.outage.withLock { $0 = outage }
        let body =
            "["
            + (0..<20).map { Self.event("event", name: "level_up", user: "user-\($0)", idfv: UUID().uuidString) }
            .joined(separator: ",") + "]"
        // Retries seconds away: the first batch's requests are all this test sees.
        let slow: @Sendable (Int) -> String = { port in
            yaml(env, vendorPort: port, vendor: "singular")
                .replacingOccurrences(of: "backoff_initial_ms: 10\n", with: "backoff_initial_ms: 5000\n")
                .replacingOccurrences(of: "backoff_max_ms: 50\n", with: "backoff_max_ms: 50000\n")
        }
        try await withGateway(vendors, env: env, yaml: slow) {
            (client: TestClientProtocol, gateway: Gateway) async throws in
            #expect(try await post(client, body).status == .accepted)
            #expect(try await env.eventually { vendors.outage.withLock { $0 } < outage })
            // Until every request the vendor saw has its attempt written: a loaded host
            // writes them later than the vendor answers.
            var (asked, untried) = (0, 0)
            #expect(
                try await env.eventually {
                    asked = outage - vendors.outage.withLock { $0 }
                    untried =
                        try await gateway.sqlite!.pool.read { db in
                            try Int.fetchOne(
                                db, sql: "SELECT COUNT(*) FROM outbox WHERE sink = 's2s.singular' AND attempts = 0")
                        } ?? 0
                    return untried == 20 - asked
                })
            // At most one per lane at work when the first refusal came (`concurrency`, 8).
            #expect(asked <= 8, "\(asked) requests")
        }
    }

    /// The mark is on disk while the request is out, and gone with the answer.
    @Test func aVendorsEventIsMarkedAsBeingSentWhileItsRequestIsOut() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        vendors.slowAnswers.withLock { $0 = 1 }
        let body = Self.event("event", name: "level_up", user: "user-1", idfv: UUID().uuidString)
        try await withGateway(vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: "singular") }) {
            (client: TestClientProtocol, gateway: Gateway) async throws in
            #expect(try await post(client, body).status == .accepted)
            // Singular holds its answer two seconds (the default timeout is longer).
            let marked = try await env.eventually {
                try await gateway.sqlite!.pool.read { db in
                    try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox WHERE sending_since IS NOT NULL") == 1
                }
            }
            #expect(marked)
            #expect(try await env.eventually { try await gateway.store.outboxStats()["s2s.singular"] == nil })
            #expect(vendors.accepted("singular").count == 1)
            #expect(try await gateway.store.deadLetters(sink: "s2s.singular", limit: 10).isEmpty)
        }
    }

    /// `on_no_answer: retry` sends such an event again, as an outage; and an answer whose
    /// body stalls is its status (a `503`, retried), never a request left unanswered.
    @Test(arguments: [(true, false), (false, true)])
    func anUnansweredEventIsRetriedWhenConfiguredAndAStalled503IsAnAnswer(retryUnanswered: Bool, stalled503: Bool)
        async throws
    {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        if stalled503 {
            vendors.stalledAnswers.withLock { $0 = [.serviceUnavailable] }
        } else {
            vendors.slowAnswers.withLock { $0 = 1 }
        }
        // The timeout is far from both the vendor's hold and a loaded machine's delays: the
        // status of the stalled answer arrives well within it, the held answer far past it,
        // and so does the stalled body, which a gateway waiting for it would time out on.
        vendors.holdFor.withLock { $0 = .seconds(stalled503 ? 40 : 12) }
        let timeoutMs = stalled503 ? 15000 : 3000
        let extra = "\n        timeout_ms: \(timeoutMs)" + (retryUnanswered ? "\n        on_no_answer: retry" : "")
        let purchase = Self.event("purchase", extra: #""revenue":9.99,"currency":"USD","transaction_id":"2000000998""#)
        try await withGateway(
            vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: "singular", singularExtra: extra) }
        ) { client, gateway in
            let status = try await post(client, purchase).status
            #expect(status == .accepted)
            // The second request is the retry; the first reached the vendor too.
            let sentTwice = try await env.eventually { vendors.accepted("singular").count == 2 }
            #expect(sentTwice)
            let drained = try await env.eventually { try await gateway.store.outboxStats()["s2s.singular"] == nil }
            #expect(drained)
            let letters = try await gateway.store.deadLetters(sink: "s2s.singular", limit: 10)
            #expect(letters.isEmpty)
        }
    }

    /// Singular names the app by bundle under one key for the account: with the bundles
    /// configured, a key for one app cannot send events (and revenue) for another's.
    @Test func withSingularsAppsConfiguredAnEventGoesOnlyToItsOwnAppsBundle() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        let apps = "\n        apps: { \"\(Self.appID)\": { bundle_id: com.example.meditate } }"
        try await withGateway(
            vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: "singular", singularExtra: apps) }
        ) { client, _ in
            func field(_ body: String) async throws -> String? {
                let response = try await post(client, body)
                #expect(response.status == .unprocessableContent)
                let json =
                    try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
                return (json?["error"] as? [String: Any])?["field"] as? String
            }
            let other = Self.event("purchase", extra: #""revenue":999.99,"currency":"USD","transaction_id":"7""#)
                .replacingOccurrences(of: "com.example.meditate", with: "com.other-company.app")
            let otherField = try await field(other)
            #expect(otherField == "bundle_id")
            let unlisted = Self.event("session").replacingOccurrences(of: Self.appID, with: "987654321")
            let unlistedField = try await field(unlisted)
            #expect(unlistedField == "app_id")
            // Without a bundle of its own, the configured one is sent.
            let bare = Self.event("session").replacingOccurrences(of: #""bundle_id":"com.example.meditate","#, with: "")
            #expect(try await post(client, bare).status == .accepted)
            #expect(try await env.eventually { vendors.accepted("singular").count == 1 })
            #expect(vendors.accepted("singular").first?.parameters["i"] == "com.example.meditate")
        }
    }

    /// A vendor that took the event and answered too late may have counted it, and no
    /// vendor dedupes: sent again, its revenue counted twice. It waits in the dead
    /// letters for an operator instead.
    /// Late, or a `200` whose body (Singular's verdict) stalls: the verdict is lost either way.
    @Test(arguments: [false, true])
    func anEventTheVendorTookButDidNotAnswerInTimeIsNotSentAgain(stalled200: Bool) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        if stalled200 {
            vendors.stalledAnswers.withLock { $0 = [.ok] }
        } else {
            vendors.slowAnswers.withLock { $0 = 1 }
        }
        let purchase = Self.event("purchase", extra: #""revenue":9.99,"currency":"USD","transaction_id":"2000000999""#)
        try await withGateway(
            vendors, env: env,
            yaml: { yaml(env, vendorPort: $0, vendor: "singular", singularExtra: "\n        timeout_ms: 300") }
        ) { client, gateway in
            #expect(try await post(client, purchase).status == .accepted)
            #expect(
                try await env.eventually {
                    try await !gateway.store.deadLetters(sink: "s2s.singular", limit: 10).isEmpty
                })
            let letter = try #require(try await gateway.store.deadLetters(sink: "s2s.singular", limit: 10).first)
            #expect(letter.error.contains("may have counted it"))
            // Past the slow answer and any backoff: the vendor saw it once.
            try await Task.sleep(for: .seconds(2))
            #expect(vendors.accepted("singular").count == 1)
        }
    }

    @Test func anEventAdjustDeclinesForAnOptedOutDeviceIsFinalAndNotCountedAsDelivered() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        let optedOut = UUID().uuidString
        vendors.optedOut.withLock { $0 = [optedOut] }
        let body =
            "["
            + [
                Self.event("event", name: "level_up", user: "user-in", idfv: UUID().uuidString),
                Self.event("event", name: "level_up", user: "user-out", idfv: optedOut),
            ].joined(separator: ",") + "]"
        try await withGateway(vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: "adjust") }) {
            client, gateway in
            #expect(try await post(client, body).status == .accepted)
            #expect(try await env.eventually { try await gateway.store.outboxStats()["s2s.adjust"] == nil })
            #expect(vendors.accepted("adjust").count == 1)
            #expect(vendors.refused == ["adjust: Device is opted out"], "asked once, never retried")
            #expect(try await gateway.store.deadLetters(sink: "s2s.adjust", limit: 10).isEmpty)
            let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            let deliveries = metrics.split(separator: "\n").filter {
                $0.hasPrefix("gateway_deliveries_total") && $0.contains(#"sink="s2s.adjust""#)
            }
            #expect(deliveries.contains { $0.contains(#"outcome="declined""#) && $0.hasSuffix(" 1") }, "\(deliveries)")
            #expect(deliveries.contains { $0.contains(#"outcome="delivered""#) && $0.hasSuffix(" 1") }, "\(deliveries)")
        }
    }

    @Test func anEventForADeviceAdjustHasNotLearnedYetGoesThroughOnceItHas() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        let racing = UUID().uuidString
        // The backend's purchase reached the gateway before the app's Adjust SDK reached Adjust.
        vendors.unknownToAdjust.withLock { $0 = [racing: 3] }
        let body = Self.event("event", name: "level_up", user: "user-racing", idfv: racing)
        try await withGateway(vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: "adjust") }) {
            (client: TestClientProtocol, gateway: Gateway) async throws in
            #expect(try await post(client, body).status == .accepted)
            #expect(try await env.eventually { try await gateway.store.outboxStats()["s2s.adjust"] == nil })
            let notFound = [String](repeating: "adjust: Device not found", count: 3)
            #expect(vendors.refused == notFound, "asked again until Adjust knew the device")
            let sent: [String?] = vendors.accepted("adjust").map { $0.parameters["idfv"] }
            #expect(sent == [racing])
            #expect(try await gateway.store.deadLetters(sink: "s2s.adjust", limit: 10).isEmpty)
        }
    }

    @Test func callbacksNeedTheVendorsSecretAndBecomeRecords() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        let install = """
            {"event_name":"install","media_source":"Apple Search Ads","campaign":"US Search - Meditation",
             "af_c_id":"542370539","af_adset":"Exact - Core","af_adset_id":"542317095","af_keywords":"meditation app",
             "install_time":"2023-11-01 04:05:07.925","attributed_touch_time":"2023-11-01 03:48:33.000",
             "attributed_touch_type":"click","app_id":"id\(Self.appID)","customer_user_id":"user-9",
             "appsflyer_id":"1698811503838-6471005","idfv":"\(Self.idfv)","country_code":"us"}
            """
        try await withGateway(vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: "singular") }) {
            client, gateway in
            let path = "/v1/s2s/appsflyer/callbacks"
            let none = try await post(client, install, uri: path)
            #expect(none.status == .unauthorized)
            let wrong = try await client.execute(
                uri: path + "?secret=not-the-secret-at-all", method: .post, body: ByteBuffer(string: install))
            #expect(wrong.status == .unauthorized)
            #expect(!String(buffer: wrong.body).contains("not-the-secret"))

            let good = try await client.execute(
                uri: path, method: .post, headers: [HTTPFields.Element.Name("X-Gateway-Secret")!: Self.callbackSecret],
                body: ByteBuffer(string: install))
            #expect(good.status == .ok)
            struct Answer: Decodable { let record_id: String; let status: String }
            let answer = try JSONDecoder().decode(Answer.self, from: Data(good.body.readableBytesView))
            let record = try #require(try await gateway.store.record(id: answer.record_id))
            #expect(record.provider == "s2s" && record.kind == .install && record.attributed)
            #expect(record.network == "Apple Search Ads")
            #expect(record.campaignName == "US Search - Meditation" && record.campaignID == 542_370_539)
            #expect(record.adGroupName == "Exact - Core" && record.keyword == "meditation app")
            #expect(record.conversionDate == ISO8601.parse("2023-11-01T04:05:07.925Z"))
            #expect(record.appID == Self.appID && record.appUserID == "user-9")
            #expect(try await env.eventually { try sinkRows(env)[answer.record_id] != nil })
            // The vendor's retry is the same record.
            let again = try await client.execute(
                uri: path, method: .post, headers: [.authorization: "Bearer \(Self.callbackSecret)"],
                body: ByteBuffer(string: install))
            #expect(again.status == .ok)
            #expect(
                try JSONDecoder().decode(Answer.self, from: Data(again.body.readableBytesView)).status == "duplicate")

            // Adjust calls back with a GET and the secret in the URL.
            let query =
                "activity_kind=install&network_name=Organic&is_organic=1&installed_at=1698811507"
                + "&adid=0123456789abcdef0123456789abcdef&app_id=\(Self.appID)"
            let adjust = try await client.execute(
                uri: "/v1/s2s/adjust/callbacks?\(query)&secret=\(Self.callbackSecret)", method: .get)
            #expect(adjust.status == .ok)
            let organic = try JSONDecoder().decode(Answer.self, from: Data(adjust.body.readableBytesView))
            let organicRecord = try #require(try await gateway.store.record(id: organic.record_id))
            #expect(
                !organicRecord.attributed && organicRecord.network == "Organic" && organicRecord.campaignName == nil)
            // Values in the URL read as a form's do: `+` is a space, `%2B` a plus.
            let spaced =
                "activity_kind=install&network_name=Apple+Search+Ads&campaign_name=Winter%20Sale+US%2B&is_organic=0"
                + "&installed_at=1698811508&adid=0123456789abcdef0123456789abcdef&app_id=\(Self.appID)"
            let named = try await client.execute(
                uri: "/v1/s2s/adjust/callbacks?\(spaced)&secret=\(Self.callbackSecret)", method: .get)
            #expect(named.status == .ok)
            let namedRecord = try #require(
                try await gateway.store.record(
                    id: try JSONDecoder().decode(Answer.self, from: Data(named.body.readableBytesView)).record_id))
            #expect(namedRecord.network == "Apple Search Ads")
            #expect(namedRecord.campaignName == "Winter Sale US+")
            // An IDFV that is no UUID is refused, as /v1/events refuses it.
            let badDevice = try await client.execute(
                uri: "/v1/s2s/adjust/callbacks?\(spaced)&idfv=zzz&secret=\(Self.callbackSecret)", method: .get)
            #expect(badDevice.status == .unprocessableContent)
            #expect(String(buffer: badDevice.body).contains(#""field":"idfv""#))
            // A vendor that leaves out the app's id: the operator puts it in the callback URL.
            let appless = install.replacingOccurrences(of: #""app_id":"id\#(Self.appID)","#, with: "")
                .replacingOccurrences(of: "1698811503838-6471005", with: "1698811503838-6471006")
            #expect(!appless.contains("app_id"))
            let fromURL = try await client.execute(
                uri: path + "?app_id=id987654321&secret=\(Self.callbackSecret)", method: .post,
                body: ByteBuffer(string: appless))
            #expect(fromURL.status == .ok)
            let urlAnswer = try JSONDecoder().decode(Answer.self, from: Data(fromURL.body.readableBytesView))
            #expect(try await gateway.store.record(id: urlAnswer.record_id)?.appID == "987654321")
            // Without a configured secret a vendor has no callback route.
            #expect(try await post(client, install, uri: "/v1/s2s/singular/callbacks").status == .notFound)
        }
    }

    /// An event with neither a transaction nor an `event_id` is known by its content: a
    /// backend's resend that writes its time or IDFV another way is the same event, not a
    /// second one for the vendor to count.
    @Test func aResendWritingItsTimeOrDeviceOtherwiseIsTheSameEvent() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        let idfv = Self.idfv.lowercased()
        @Sendable func levelUp(_ time: String, _ idfv: String, revenue: String = "0.5") -> String {
            #"{"type":"event","name":"level_up","app_id":"\#(Self.appID)","app_user_id":"user-1","idfv":"\#(idfv)","att_status":2,"timestamp":\#(time),"revenue":\#(revenue),"currency":"USD"}"#
        }
        let seconds = Int(Date().timeIntervalSince1970) - 60
        let iso = ISO8601.format(Date(timeIntervalSince1970: TimeInterval(seconds)))
        try await withGateway(vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: "singular") }) { client, _ in
            #expect(try await post(client, levelUp("\"\(iso)\"", idfv)).status == .accepted)
            for resend in [
                levelUp("\(seconds)", Self.idfv), levelUp("\(seconds).0", idfv, revenue: "\"0.50\""),
                levelUp("\"\(iso.replacingOccurrences(of: "Z", with: ".000Z"))\"", idfv, revenue: "0.50"),
            ] {
                let again = try await post(client, resend)
                #expect(again.status == .ok && String(buffer: again.body).contains("duplicate"), "\(resend)")
            }
            // A second later is another event; so are two a fraction of a millisecond apart,
            // however each is written.
            #expect(try await post(client, levelUp("\(seconds + 1)", idfv)).status == .accepted)
            let micro = iso.replacingOccurrences(of: "Z", with: ".1231Z")
            #expect(try await post(client, levelUp("\"\(micro)\"", idfv)).status == .accepted)
            #expect(try await post(client, levelUp("\(seconds).1234", idfv)).status == .accepted)
            let again = try await post(client, levelUp("\(seconds).1231", idfv))
            #expect(again.status == .ok && String(buffer: again.body).contains("duplicate"))
            // ISO-8601's comma before the fraction: half a second later, not the next second.
            let comma = iso.replacingOccurrences(of: "Z", with: ",5Z")
            #expect(try await post(client, levelUp("\"\(comma)\"", idfv)).status == .accepted)
            let sameAsComma = try await post(client, levelUp("\(seconds).5", idfv))
            #expect(String(buffer: sameAsComma.body).contains("duplicate"))
            #expect(try await env.eventually { try sinkRows(env).count == 5 })
        }
    }

    /// Events stored under an earlier rule were keyed by their text as sent: upgrading the
    /// store rekeys them, so that their resend, however spelt, is still a duplicate.
    @Test func aStoreUpgradedKeysItsEventsSoThatTheirResendsAreDuplicates() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let seconds = Int(Date().timeIntervalSince1970) - 60
        let iso = ISO8601.format(Date(timeIntervalSince1970: TimeInterval(seconds)))
        let raw =
            #"{"type":"event","name":"level_up","app_id":"\#(Self.appID)","idfv":"\#(Self.idfv.lowercased())","att_status":2,"timestamp":"\#(iso)"}"#
        let oldKey = DedupeKey.make(
            "s2s", Self.appID, "content",
            Hex.lowercase(SHA256.hash(data: Data(try JSONValue.parse(Data(raw.utf8)).jsonText.utf8))))
        try SQLiteStoreSchema.migrator.migrate(
            try DatabaseQueue(path: env.databasePath), upTo: "data:s2s-purchases-keyed-by-transaction")
        // And one the first version of the upgrade keyed under `event:` by another rule (times
        // in milliseconds).
        let rawLater = raw.replacingOccurrences(of: "level_up", with: "level_down")
        try await DatabaseQueue(path: env.databasePath).write { db in
            for (id, key, body) in [
                ("old-1", oldKey, raw),
                ("old-2", "s2s:\(Self.appID):event:\(String(repeating: "0", count: 64))", rawLater),
            ] {
                try db.execute(
                    sql:
                        "INSERT INTO records (record_id, dedupe_key, provider, received_at, body) VALUES (?, ?, 's2s', 0, ?)",
                    arguments: [
                        id, key,
                        #"{"record_id":"\#(id)","provider":"s2s","kind":"event","app_id":"\#(Self.appID)","raw":\#(body)}"#,
                    ])
            }
        }
        let vendors = FakeVendors()
        try await withGateway(vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: "singular") }) { client, _ in
            for name in ["level_up", "level_down"] {
                let resend =
                    #"{"type":"event","name":"\#(name)","app_id":"\#(Self.appID)","idfv":"\#(Self.idfv)","att_status":2,"timestamp":\#(seconds)}"#
                let again = try await post(client, resend)
                #expect(
                    again.status == .ok && String(buffer: again.body).contains("duplicate"),
                    "\(name): \(String(buffer: again.body))")
            }
        }
        #expect(vendors.accepted.isEmpty)
    }

    @Test func aRefundIsStoredOnceAndNeverSentToTheVendor() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        let refund = Self.event(
            "refund", extra: #""revenue":9.99,"currency":"USD","transaction_id":"2000000123456789""#)
        try await withGateway(vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: "adjust") }) {
            (client: TestClientProtocol, gateway: Gateway) async throws in
            let unnamed = try await post(client, Self.event("refund", extra: #""revenue":9.99,"currency":"USD""#))
            #expect(unnamed.status == .unprocessableContent)
            #expect(String(buffer: unnamed.body).contains(#""field":"transaction_id""#))

            #expect(try await post(client, refund).status == .accepted)
            // App Store Server Notifications are resent, a resend may differ in its time and
            // event id: one refund per purchase all the same.
            let resent = Self.event(
                "refund",
                extra:
                    #""event_id":"notification-2","revenue":9.99,"currency":"USD","transaction_id":"2000000123456789""#)
            let again = try await post(client, resent)
            #expect(again.status == .ok && String(buffer: again.body).contains("duplicate"))
            #expect(try await env.eventually { try sinkRows(env).values.map(\.kind) == ["refund"] })
            #expect(try await gateway.store.outboxStats()["s2s.adjust"] == nil)
            #expect(vendors.accepted.isEmpty && vendors.refused.isEmpty)
        }
    }

    @Test func badEventsGetAnAnswerNamingTheField() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let vendors = FakeVendors()
        try await withGateway(vendors, env: env, yaml: { yaml(env, vendorPort: $0, vendor: "singular") }) { client, _ in
            let bad = "[" + Self.event("session") + "," + Self.event("session", att: 7) + "]"
            let response = try await post(client, bad)
            #expect(response.status == .unprocessableContent)
            struct Failure: Decodable { struct E: Decodable { let code: String; let field: String? }; let error: E }
            let failure = try JSONDecoder().decode(Failure.self, from: Data(response.body.readableBytesView))
            #expect(failure.error.field == "[1].att_status")
            // Nothing of a refused request is stored or sent.
            try await Task.sleep(for: .milliseconds(200))
            #expect(try sinkRows(env).isEmpty && vendors.accepted.isEmpty)
        }
    }
}

extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
