import Crypto
import Foundation
import GatewayConfig
import GatewayCore
import GatewayServer
import GRDB
import Hummingbird
import HummingbirdTesting
import Testing

/// Postbacks through the real server and SQLite, signed with a test key that the config
/// names in place of Apple's.
@Suite struct SKAdNetworkEndToEndTests {
    let key = P256.Signing.PrivateKey()

    func configuration(
        _ env: TestEnvironment, policy: String = "quarantine", model: String? = nil, auth: String = "",
        quarantineMaxMB: Int = 64
    ) throws -> GatewayConfiguration {
        var modelLine = ""
        if let model {
            let path = env.directory.appendingPathComponent("conversion-model.yaml")
            try model.write(to: path, atomically: true, encoding: .utf8)
            modelLine = "conversion_model: \(path.path)"
        }
        let yaml = """
            server: { host: 127.0.0.1, port: 0, max_body_bytes: 1048576, log_level: warning }
            storage: { sqlite: { path: \(env.databasePath), durability: normal } }
            providers:
              skadnetwork:
                on_invalid_signature: \(policy)
                quarantine_max_mb: \(quarantineMaxMB)
                \(modelLine)
                keys: { skan_p256: "\(key.publicKey.derRepresentation.base64EncodedString())" }
            sinks:
              local: { type: sqlite, backoff_initial_ms: 10, backoff_max_ms: 100 }
              audit: { type: sqlite, path: \(env.directory.appendingPathComponent("audit.sqlite").path) }
            routes:
              - sinks: [local]
              - { sinks: [audit], where: { quarantined: true } }
            """ + auth
        return try ConfigLoader.parse(yaml: yaml, file: "skan.yaml", environment: [:], registry: .builtIn)
    }

    /// A SKAN 4.0 postback signed as Apple signs it.
    func postback(transaction: String, sequence: Int = 0, fine: Int? = 12) throws -> [String: Any] {
        var fields: [String: Any] = [
            "version": "4.0", "ad-network-id": "example123.skadnetwork", "source-identifier": "5239",
            "app-id": 525_463_029, "transaction-id": transaction, "redownload": false, "source-domain": "example.com",
            "fidelity-type": 1, "did-win": true, "postback-sequence-index": sequence,
        ]
        if let fine { fields["conversion-value"] = fine } else { fields["coarse-conversion-value"] = "medium" }
        let message = [
            "4.0", "example123.skadnetwork", "5239", "525463029", transaction, "false", "example.com", "1", "true",
            String(sequence),
        ].joined(separator: "\u{2063}")
        fields["attribution-signature"] = try key.signature(for: Data(message.utf8)).derRepresentation
            .base64EncodedString()
        return fields
    }

    func body(_ value: Any) throws -> ByteBuffer {
        ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: value))
    }

    func rows(_ path: String, _ sql: String) throws -> [Row] {
        try DatabaseQueue(path: path).read { db in
            guard try db.tableExists("attribution_records") else { return [] }
            return try Row.fetchAll(db, sql: sql)
        }
    }

    /// Forged postbacks on Apple's open routes filled the disk: past `quarantine_max_mb`, the
    /// oldest quarantined records are dropped and counted. Verified ones stay, and the audit
    /// sink has already taken its copies (its rows are written with the records).
    @Test func quarantinedPostbacksAreKeptWithinTheirCapOldestDroppedFirst() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try configuration(env, quarantineMaxMB: 1))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            let path = "/.well-known/skadnetwork/report-attribution/"
            let real = try await client.execute(
                uri: path, method: .post, body: try body(try postback(transaction: "real")))
            #expect(real.status == .ok)
            // About 3 KB stored each: 400 of them are over 1 MiB. Random bytes, since the
            // store compresses raw payloads.
            for index in 0..<400 {
                var forged = try postback(transaction: "forged-\(index)")
                forged["app-id"] = 999
                forged["padding"] = Data((0..<2_250).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
                let answer = try await client.execute(uri: path, method: .post, body: try body(forged))
                #expect(answer.status == .ok)
            }
            func count(_ condition: String) throws -> Int {
                try DatabaseQueue(path: env.databasePath).read { db in
                    try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM records WHERE \(condition)") ?? 0
                }
            }
            func quarantinedBytes() throws -> Int {
                try DatabaseQueue(path: env.databasePath).read { db in
                    try Int.fetchOne(db, sql: "SELECT COALESCE(SUM(quarantined_bytes), 0) FROM records") ?? 0
                }
            }
            #expect(try await env.eventually { try quarantinedBytes() <= 1 << 20 })
            #expect(try count("dedupe_key LIKE 'skan:forged-0:%'") == 0)
            #expect(try count("dedupe_key LIKE 'skan:forged-399:%'") == 1)
            #expect(try count("dedupe_key = 'skan:real:0'") == 1)
            let dropped = 400 - (try count("quarantined_bytes IS NOT NULL"))
            #expect(dropped > 0)
            let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            #expect(metrics.contains(#"gateway_quarantine_dropped_total{provider="skadnetwork"} \#(dropped)"#))
            let audit = env.directory.appendingPathComponent("audit.sqlite").path
            #expect(try rows(audit, "SELECT record_id FROM attribution_records").count == 400)
        }
    }

    @Test func tenThousandPostbacksWithDuplicatesLandOnceEachAndLaterWindowsAreKept() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try configuration(env))
        // 8,000 distinct postbacks: 2,000 installs with all three SKAN 4 windows, and 2,000 with one.
        var unique: [[String: Any]] = []
        for install in 0..<2000 {
            for sequence in 0..<3 {
                unique.append(
                    try postback(transaction: "tx-\(install)", sequence: sequence, fine: sequence == 0 ? 12 : nil))
            }
        }
        for install in 2000..<4000 { unique.append(try postback(transaction: "tx-\(install)")) }
        // 2,000 copies, as devices retrying and relays forwarding twice send them.
        let all = unique + (0..<2000).map { unique[($0 * 7) % unique.count] }
        #expect(all.count == 10_000)
        let requests = try stride(from: 0, to: all.count, by: 100).map {
            try JSONSerialization.data(withJSONObject: Array(all[$0..<$0 + 100]))
        }

        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            for request in requests {
                let response = try await client.execute(
                    uri: "/v1/skadnetwork/postbacks", method: .post, body: ByteBuffer(bytes: request))
                #expect([200, 202].contains(response.status.code), "\(String(buffer: response.body))")
            }
            #expect(try await env.eventually { try env.deliveredRecordIDs().count >= 8000 })
            let counts = try rows(
                env.databasePath,
                "SELECT COUNT(*) AS n, COUNT(DISTINCT transaction_id || ':' || postback_sequence_index) AS keys, SUM(signature = 'verified') AS verified FROM attribution_records"
            )
            #expect(counts.first?["n"] as Int? == 8000)
            #expect(counts.first?["keys"] as Int? == 8000)
            #expect(counts.first?["verified"] as Int? == 8000)
            let windows = try rows(
                env.databasePath,
                "SELECT postback_sequence_index AS i, fine_value, coarse_value FROM attribution_records WHERE transaction_id = 'tx-7' ORDER BY i"
            )
            #expect(windows.map { $0["i"] as Int } == [0, 1, 2])
            #expect(windows.map { $0["coarse_value"] as String? } == [nil, "medium", "medium"])
        }
    }

    /// Apple's routes take a postback from anyone and keep an unverifiable one whole: at
    /// the server's 1 MiB, one client could fill the disk fast. They read 4 KiB (a
    /// postback is under 2 KB); the keyed route keeps the server's limit, for batches.
    @Test func applesOpenRoutesReadAPostbacksSizeNotTheServersLimit() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try configuration(env))
        var paddedFields = try postback(transaction: "padded")
        paddedFields["padding"] = String(repeating: "x", count: 20_000)
        var smallFields = try postback(transaction: "small")
        smallFields["padding"] = String(repeating: "x", count: 2_000)
        let padded = try body(paddedFields), small = try body(smallFields)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            for path in [
                "/.well-known/skadnetwork/report-attribution/", "/.well-known/appattribution/report-attribution/",
            ] {
                let refused = try await client.execute(uri: path, method: .post, body: padded)
                #expect(refused.status == .contentTooLarge, "\(path)")
                #expect(String(buffer: refused.body).contains("4096 bytes"), "\(String(buffer: refused.body))")
            }
            let taken = try await client.execute(
                uri: "/.well-known/skadnetwork/report-attribution/", method: .post, body: small)
            #expect(taken.status == .ok, "\(String(buffer: taken.body))")
            let forwarded = try await client.execute(uri: "/v1/skadnetwork/postbacks", method: .post, body: padded)
            #expect(forwarded.status == .accepted, "\(String(buffer: forwarded.body))")
        }
    }

    @Test func applesCopiesAreAnsweredTwoHundredOnEitherPathAndForgeriesQuarantined() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try configuration(env))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            let path = "/.well-known/skadnetwork/report-attribution"
            let first = try await client.execute(
                uri: path + "/", method: .post, body: try body(try postback(transaction: "a")))
            #expect(first.status == .ok)
            let bare = try await client.execute(
                uri: path, method: .post, body: try body(try postback(transaction: "b")))
            #expect(bare.status == .ok)
            // A device retrying gets 200 and nothing new.
            let again = try await client.execute(
                uri: path + "/", method: .post, body: try body(try postback(transaction: "a")))
            #expect(again.status == .ok && String(buffer: again.body).contains("duplicate"))

            var forged = try postback(transaction: "c")
            forged["app-id"] = 999
            let quarantined = try await client.execute(uri: path + "/", method: .post, body: try body(forged))
            #expect(quarantined.status == .ok)

            let audit = env.directory.appendingPathComponent("audit.sqlite").path
            #expect(
                try await env.eventually { try rows(audit, "SELECT record_id FROM attribution_records").count == 1 })
            #expect(try await env.eventually { try env.deliveredRecordIDs().count == 2 })
            let kept = try rows(audit, "SELECT transaction_id, signature, raw FROM attribution_records")
            #expect(kept.first?["transaction_id"] as String? == "c")
            #expect(kept.first?["signature"] as String? == "invalid")
            // Kept compactly: the postback once, with the verdict's reason, and no field
            // lists that would repeat whatever fields a forger added.
            let raw = try #require(kept.first?["raw"] as String?)
            #expect(raw.contains(#""transaction-id":"c""#) && raw.contains(#""reason""#), "\(raw)")
            #expect(!raw.contains("unsigned_fields") && !raw.contains("signed_fields"), "\(raw)")

            let array = try await client.execute(
                uri: path + "/", method: .post, body: try body([try postback(transaction: "d")]))
            #expect(array.status.code == 400)

            // Verdicts are counted once per stored postback (the device's retry is not).
            let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            #expect(
                metrics.contains(
                    #"gateway_signature_verdicts_total{provider="skadnetwork",verdict="verified",version="4.0"} 2"#))
            #expect(
                metrics.contains(
                    #"gateway_signature_verdicts_total{provider="skadnetwork",verdict="invalid",version="4.0"} 1"#))
            #expect(
                metrics.contains(
                    #"gateway_signature_verdicts_total{provider="skadnetwork",verdict="invalid",version="3.0"} 0"#))
        }
    }

    @Test func aPostbackThatCannotBeVerifiedIsQuarantinedAndCannotTakeTheGenuineCopysPlace() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try configuration(env, policy: "reject"))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            let path = "/.well-known/skadnetwork/report-attribution/"
            // Anyone can post here and claim a version the gateway has no key for, first.
            var forged = try postback(transaction: "t-1")
            forged["version"] = "9.0"
            let claimed = try await client.execute(uri: path, method: .post, body: try body(forged))
            #expect(claimed.status == .ok, "stored, as Apple's own future versions must be")
            let genuine = try await client.execute(
                uri: path, method: .post, body: try body(try postback(transaction: "t-1")))
            #expect(genuine.status == .ok && !String(buffer: genuine.body).contains("duplicate"))

            let audit = env.directory.appendingPathComponent("audit.sqlite").path
            #expect(
                try await env.eventually { try rows(audit, "SELECT record_id FROM attribution_records").count == 1 })
            #expect(
                try rows(audit, "SELECT signature FROM attribution_records").first?["signature"] as String?
                    == "unverifiable")
            #expect(try await env.eventually { try env.deliveredRecordIDs().count == 1 })
            let delivered = try rows(env.databasePath, "SELECT transaction_id, signature FROM attribution_records")
            #expect(delivered.map { $0["signature"] as String? } == ["verified"])
            // The claimed version is no series of its own.
            let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            #expect(
                metrics.contains(
                    #"gateway_signature_verdicts_total{provider="skadnetwork",verdict="unverifiable",version="other"} 1"#
                ))
            #expect(!metrics.contains(#"version="9.0""#))

            // Their fields are held to the length every other route's are.
            var long = try postback(transaction: String(repeating: "x", count: 1025))
            long["version"] = "9.0"
            let refused = try await client.execute(uri: path, method: .post, body: try body(long))
            #expect(refused.status.code == 422)
            #expect(String(buffer: refused.body).contains(#""field":"transaction-id""#))
        }
    }

    @Test func theRejectPolicyRefusesForgeriesWithAJSONError() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try configuration(env, policy: "reject"))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            var forged = try postback(transaction: "x")
            forged["transaction-id"] = "y"
            let response = try await client.execute(
                uri: "/v1/skadnetwork/postbacks", method: .post, body: try body(forged))
            #expect(response.status.code == 422)
            let text = String(buffer: response.body)
            #expect(text.contains(#""code":"invalid_signature""#) && text.contains(#""field":"attribution-signature""#))
            #expect(try await gateway.store.countRecords(matching: .init()) == 0)
        }
    }

    static let model = """
        windows:
          - postback: 0
            fine:
              - { values: 0, events: [session] }
              - { values: 1-9, events: [trial_started] }
              - { values: 10-63, events: [purchase], revenue: { min: 0.99, max: 49.99 }, currency: USD }
        """

    /// A key is checked against each postback's app before any signature is verified, and
    /// one request verifies at most 100: a caller cannot spend the gateway's CPU on
    /// postbacks of an app its key is not for, nor much of it on its own.
    @Test func postbacksForAnotherAppAreRefusedBeforeTheirSignaturesAreVerified() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let (own, other) = ("backend-key-for-525463029", "backend-key-for-the-app-999")
        let auth = """

            auth:
              api_keys:
                - { app_id: "525463029", key: "\(own)", scope: backend }
                - { app_id: "999", key: "\(other)", scope: backend }
            """
        let gateway = try await Gateway.build(configuration: try configuration(env, policy: "reject", auth: auth))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            func post(_ value: Any, key: String) async throws -> (Int, String) {
                let response = try await client.execute(
                    uri: "/v1/skadnetwork/postbacks", method: .post, headers: [.authorization: "Bearer \(key)"],
                    body: try body(value))
                return (Int(response.status.code), String(buffer: response.body))
            }
            var forged = try postback(transaction: "x")
            forged["transaction-id"] = "y"
            // With its app's key, a forgery is verified and refused for its signature; with
            // another app's, it is refused for its app, and its signature is never checked.
            #expect(try await post(forged, key: own).1.contains(#""code":"invalid_signature""#))
            let refused = try await post([try postback(transaction: "a"), forged], key: other)
            #expect(refused.0 == 403 && refused.1.contains(#""field":"app_id""#), "\(refused.1)")
            // A body that names no app is missing a field, not forbidden for an app.
            let anonymous = try await post(["version": "3.0"], key: own)
            #expect(anonymous.0 == 422 && anonymous.1.contains(#""code":"missing_field""#), "\(anonymous.1)")

            let many = try (0..<101).map { try postback(transaction: "many-\($0)") }
            let tooMany = try await post(many, key: own)
            #expect(tooMany.0 == 422 && tooMany.1.contains("at most 100 postbacks"), "\(tooMany.1)")
            #expect(try await post(Array(many.prefix(100)), key: own).0 == 202)
            #expect(try await gateway.store.countRecords(matching: .init()) == 100)
        }
    }

    @Test func theModelDecodesPostbacksAndAnswersWhichValueToSetNext() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try configuration(env, model: Self.model))
        let now = Int(Date().timeIntervalSince1970)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            func ask(_ query: String) async throws -> (Int, String) {
                let response = try await client.execute(uri: "/v1/skadnetwork/conversion-value?" + query, method: .get)
                return (Int(response.status.code), String(buffer: response.body))
            }
            let base = "a=app&i=com.example.app&app_v=1.0&p=iOS&idfv=X&last_call_to_skadnetwork_timestamp=\(now - 60)"
            #expect(try await ask(base + "&n=__SESSION__&conversion_value=0") == (200, #"{"status":"ok"}"#))
            #expect(
                try await ask(base + "&n=trial_started&conversion_value=0") == (
                    200, #"{"conversion_value":1,"status":"ok"}"#
                ))
            let revenue = "total_revenue_by_currency=%7B%22USD%22%3A4.99%7D"
            #expect(
                try await ask(base + "&n=purchase&conversion_value=1&" + revenue) == (
                    200, #"{"conversion_value":10,"status":"ok"}"#
                ))
            // Values never go down, and nothing changes once the window closed.
            #expect(try await ask(base + "&n=trial_started&conversion_value=12") == (200, #"{"status":"ok"}"#))
            let closed =
                "n=purchase&conversion_value=1&\(revenue)&last_call_to_skadnetwork_timestamp=\(now - 25 * 3600)"
            #expect(try await ask(closed) == (200, #"{"status":"ok"}"#))
            let (status, error) = try await ask(base + "&n=purchase&conversion_value=99")
            #expect(status == 400 && error.contains(#""status":"error""#) && error.contains("conversion_value"))
            #expect(
                error.contains(#""error":{"code":"invalid_field","#) && error.contains(#""field":"conversion_value""#))
            let missing = try await ask(base + "&conversion_value=1").1
            #expect(missing.contains("n (the event name") && missing.contains(#""code":"missing_field""#))
            #expect(missing.contains(#""field":"n""#))
            let notANumber = try await ask(base + "&n=purchase&total_revenue_by_currency=%7B%22USD%22%3A%22x%22%7D").1
            #expect(notANumber.contains(#""field":"total_revenue_by_currency.USD""#))
            #expect(
                try await ask(base + "&n=purchase&total_revenue_by_currency=lots").1.contains(
                    "total_revenue_by_currency"))
            // As Python's, Go's and Java's encoders write it: `+` for a space.
            let spaced = "total_revenue_by_currency=%7B%22USD%22%3A+4.99%7D"
            #expect(
                try await ask(base + "&n=purchase&conversion_value=1&" + spaced) == (
                    200, #"{"conversion_value":10,"status":"ok"}"#
                ))
            // Milliseconds, `inf` or a time to come would keep the window open for good.
            for last in ["\((now - 25 * 3600) * 1000)", "inf", "\(now + 3 * 86_400)"] {
                let (status, body) = try await ask(
                    "n=purchase&conversion_value=1&\(revenue)&last_call_to_skadnetwork_timestamp=\(last)")
                #expect(status == 400 && body.contains(#""field":"last_call_to_skadnetwork_timestamp""#), "\(last)")
            }
            // The snippet's 0 for an app that never called SKAdNetwork: answered as a first call.
            let never = "first_call_to_skadnetwork_timestamp=0&last_call_to_skadnetwork_timestamp=0"
            let first = try await ask(never + "&n=trial_started&conversion_value=0")
            #expect(first == (200, #"{"conversion_value":1,"status":"ok"}"#))
            let negative = try await ask("n=purchase&first_call_to_skadnetwork_timestamp=-5").1
            #expect(negative.contains("0 if the app never called SKAdNetwork"), "\(negative)")

            let posted = try await client.execute(
                uri: "/v1/skadnetwork/postbacks", method: .post,
                body: try body(try postback(transaction: "m", fine: 12)))
            #expect(posted.status == .accepted)
            #expect(try await env.eventually { try env.deliveredRecordIDs().count == 1 })
            let row = try rows(
                env.databasePath, "SELECT events, revenue_min, revenue_max, currency FROM attribution_records")
            #expect(row.first?["events"] as String? == #"["purchase"]"#)
            #expect(row.first?["revenue_max"] as Double? == 49.99)
            #expect(row.first?["currency"] as String? == "USD")
        }
    }

    /// Singular's snippet cannot set a header: it sends its key as `a`, and reads every
    /// answer's `status` and `reason`, a refused key's as much as bad input's.
    @Test func theSnippetsKeyParameterAuthenticatesAndEveryErrorIsInItsShape() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let key = "app-key-0123456789abcdef"
        let auth = "\n" + #"auth: { api_keys: [ { app_id: "525463029", key: "\#(key)", shipped_in_app: true } ] }"#
        let gateway = try await Gateway.build(configuration: try configuration(env, model: Self.model, auth: auth))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            func ask(_ query: String, method: HTTPRequest.Method = .get, headers: HTTPFields = [:]) async throws
                -> (Int, [String: Any])
            {
                let response = try await client.execute(
                    uri: "/v1/skadnetwork/conversion-value?" + query, method: method, headers: headers)
                let json = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView))
                return (Int(response.status.code), json as? [String: Any] ?? [:])
            }
            let session = "i=com.example.app&p=iOS&n=trial_started&conversion_value=0"
            let (status, answer) = try await ask("a=\(key)&" + session)
            #expect(status == 200 && answer["status"] as? String == "ok" && answer["conversion_value"] as? Int == 1)
            // A header still does.
            #expect(try await ask(session, headers: [.authorization: "Bearer \(key)"]).0 == 200)
            for query in ["a=not-the-key&" + session, session] {
                let (status, refused) = try await ask(query)
                #expect(status == 401, "\(query)")
                #expect(refused["status"] as? String == "error", "\(query)")
                #expect((refused["reason"] as? String)?.contains("a=KEY") == true, "\(query)")
                #expect((refused["error"] as? [String: Any])?["code"] as? String == "unauthorized", "\(query)")
            }
            // Not only the route's own refusals: another method's too.
            let (postStatus, post) = try await ask("a=\(key)&" + session, method: .post)
            #expect(postStatus == 405 && post["status"] as? String == "error" && post["reason"] is String)
            // Other routes keep the gateway's one error shape.
            let other = try await client.execute(
                uri: "/v1/skadnetwork/postbacks", method: .post, body: ByteBuffer(string: "{}"))
            let otherJSON = try JSONSerialization.jsonObject(with: Data(other.body.readableBytesView)) as? [String: Any]
            #expect(other.status == .unauthorized && otherJSON?["status"] == nil && otherJSON?["error"] != nil)
        }
    }

    /// SKAN 4 and AdAttributionKit place a device in one of three windows fixed from its
    /// first call: the first takes a fine and a coarse value, the later two a coarse one.
    /// Answered by SKAN 3's 24-hour timer, a purchase on day 2 was missed, and a fine
    /// value was given for windows that carry only coarse ones.
    @Test func skan4AppsAreAnsweredForTheirPostbackWindow() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let model =
            Self.model + """

                    coarse:
                      low: { events: [session] }
                      high: { events: [purchase], revenue: { min: 0.99 }, currency: USD }
                  - postback: 1
                    coarse:
                      medium: { events: [retained] }
                      high: { events: [purchase], revenue: { min: 0.99 }, currency: USD }
                """
        let gateway = try await Gateway.build(configuration: try configuration(env, model: model))
        let now = Int(Date().timeIntervalSince1970)
        let hour = 3600
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            func ask(_ query: String) async throws -> (Int, String) {
                let response = try await client.execute(uri: "/v1/skadnetwork/conversion-value?" + query, method: .get)
                return (Int(response.status.code), String(buffer: response.body))
            }
            let revenue = "total_revenue_by_currency=%7B%22USD%22%3A4.99%7D"
            func calls(first: Int, last: Int) -> String {
                "skan_version=4.0&first_call_to_skadnetwork_timestamp=\(now - first)&last_call_to_skadnetwork_timestamp=\(now - last)"
            }
            // A purchase 30 hours after the only call: SKAN 3's timer had closed, SKAN 4's
            // first window is open.
            #expect(
                try await ask(calls(first: 30 * hour, last: 30 * hour) + "&n=purchase&conversion_value=0&" + revenue)
                    == (
                        200, #"{"coarse_value":"high","conversion_value":10,"postback_sequence_index":0,"status":"ok"}"#
                    ))
            // Day 4: the second window, coarse only, and only upward within it.
            #expect(
                try await ask(calls(first: 96 * hour, last: hour) + "&n=retained&conversion_value=10")
                    == (200, #"{"coarse_value":"medium","postback_sequence_index":1,"status":"ok"}"#))
            #expect(
                try await ask(calls(first: 96 * hour, last: hour) + "&n=retained&coarse_value=high")
                    == (200, #"{"postback_sequence_index":1,"status":"ok"}"#))
            // Day 10: a window the model says nothing of; day 40: every window closed.
            #expect(
                try await ask(calls(first: 240 * hour, last: hour) + "&n=purchase&" + revenue)
                    == (200, #"{"postback_sequence_index":2,"status":"ok"}"#))
            #expect(
                try await ask(calls(first: 960 * hour, last: hour) + "&n=purchase&" + revenue) == (
                    200, #"{"status":"ok"}"#
                ))
            // AdAttributionKit follows the same windows.
            #expect(
                try await ask(
                    "skan_version=aak&first_call_to_skadnetwork_timestamp=\(now - 96 * hour)&n=purchase&" + revenue)
                    == (200, #"{"coarse_value":"high","postback_sequence_index":1,"status":"ok"}"#))

            // An app that never called SKAdNetwork (the snippet's 0) is making its first call:
            // the first window.
            let never = "skan_version=4.0&first_call_to_skadnetwork_timestamp=0&last_call_to_skadnetwork_timestamp=0"
            let firstCall = try await ask(never + "&n=purchase&conversion_value=0&" + revenue)
            let windowZero = #"{"coarse_value":"high","conversion_value":10,"postback_sequence_index":0,"status":"ok"}"#
            #expect(firstCall == (200, windowZero))
            // Without its first call the window is unknown; calls out of order are a mistake.
            let (status, missing) = try await ask("skan_version=4&n=purchase&" + revenue)
            #expect(status == 400 && missing.contains(#""field":"first_call_to_skadnetwork_timestamp""#))
            let reversed = try await ask(calls(first: hour, last: 2 * hour) + "&n=purchase").1
            #expect(reversed.contains(#""field":"last_call_to_skadnetwork_timestamp""#))
            #expect(
                try await ask(calls(first: hour, last: hour) + "&n=purchase&coarse_value=huge").1
                    .contains(#""field":"coarse_value""#))
            for version in ["four", "0x4", "1e9", "-4"] {
                #expect(
                    try await ask("skan_version=\(version)&n=purchase").1.contains(#""field":"skan_version""#),
                    "\(version)")
            }
            // As a form encoder writes a stray space: `4+`.
            #expect(
                try await ask("skan_version=4+&first_call_to_skadnetwork_timestamp=\(now - hour)&n=session").1
                    .contains(#""postback_sequence_index":0"#))
            // The current coarse value is checked whatever the version.
            #expect(try await ask("n=purchase&coarse_value=extreme").1.contains(#""field":"coarse_value""#))
            // It changes nothing: `HEAD` answers as `GET` does.
            let head = try await client.execute(uri: "/v1/skadnetwork/conversion-value?n=session", method: .head)
            #expect(head.status == .ok && head.body.readableBytes == 0)
            // SKAN 3 callers are answered as before: no window, the 24-hour timer.
            #expect(
                try await ask(
                    "skan_version=3.0&last_call_to_skadnetwork_timestamp=\(now - 30 * hour)&n=purchase&" + revenue)
                    == (200, #"{"status":"ok"}"#))
        }
    }
}
