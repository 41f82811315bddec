import Foundation
import GatewayCore
import GatewayServer
import GRDB
import Hummingbird
import HummingbirdTesting
import Testing

/// The ASA Attribution SDK's three backend functions, exactly as the SDK calls them,
/// through the real server, SQLite and a local fake of Apple's endpoint.
@Suite struct ASASDKBackendTests {
    let harness = AdServicesEndToEndTests()
    static let sdk = ["sdk": #"{ app_id: "1234567890" }"#]
    /// For a token Apple holds: the call answers at once rather than waiting out the
    /// answer's wait for an answer the test releases only after it.
    static let sdkNotWaiting = sdk.merging(["answer_wait_ms": "0"]) { $1 }

    func call(_ client: TestClientProtocol, _ function: String, _ body: String) async throws
        -> (status: Int, json: [String: Any])
    {
        let response = try await client.execute(
            uri: "/functions/v1/\(function)", method: .post, body: ByteBuffer(string: body))
        let json = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
        return (Int(response.status.code), json ?? [:])
    }

    @Test func createResolveAndAssociateAnswerTheSDKsShapes() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let apple = FakeAppleAdServices()
        let first = AdServicesEndToEndTests.token("sdk-first")
        let later = AdServicesEndToEndTests.token("sdk-later")
        apple.script(later, [.notFound, .attributed(keywordID: 555)])
        let options = Self.sdk.merging(["not_found_interval_ms": "300"]) { $1 }
        try await harness.withGateway(apple, env: env, options: options) { client, gateway in
            // A user with a token Apple answers at once.
            let created = try await call(client, "create-user", #"{"asa_attribution_token": "\#(first)"}"#)
            #expect(created.status == 200)
            #expect(Set(created.json.keys) == ["userId", "didUserComeFromAsa", "asaAttributionResolved"])
            let userID = try #require(created.json["userId"] as? Int)
            #expect(created.json["didUserComeFromAsa"] as? Bool == true)
            #expect(created.json["asaAttributionResolved"] as? Bool == true)

            // A user without a token yet: not resolved, so the SDK tries again next launch.
            let bare = try await call(client, "create-user", "{}")
            let bareID = try #require(bare.json["userId"] as? Int)
            #expect(bareID != userID)
            #expect(bare.json["asaAttributionResolved"] as? Bool == false)
            // A token sent as null or blank is no token, as the field is optional.
            for body in [#"{"asa_attribution_token": null}"#, #"{"asa_attribution_token": "  "}"#] {
                let answer = try await call(client, "create-user", body)
                #expect(answer.status == 200 && answer.json["asaAttributionResolved"] as? Bool == false, "\(body)")
            }
            #expect(bare.json["didUserComeFromAsa"] as? Bool == false)

            // Its token arrives; Apple is not ready, so the answer is honestly pending…
            let pending = try await call(
                client, "resolve-asa-attribution", #"{"user_id": \#(bareID), "asa_attribution_token": "\#(later)"}"#)
            #expect(pending.status == 200)
            #expect(Set(pending.json.keys) == ["didUserComeFromAsa", "asaAttributionResolved"])
            #expect(pending.json["asaAttributionResolved"] as? Bool == false)
            // …and a later call finds Apple's answer without asking Apple again.
            var resolved: [String: Any] = [:]
            #expect(
                try await env.eventually {
                    resolved = try await call(
                        client, "resolve-asa-attribution",
                        #"{"user_id": \#(bareID), "asa_attribution_token": "\#(later)"}"#
                    ).json
                    return resolved["asaAttributionResolved"] as? Bool == true
                })
            #expect(resolved["didUserComeFromAsa"] as? Bool == true)
            #expect(apple.calls(later) == 2)

            // A purchase ties the transaction to the user's keyword, once.
            let transaction = "2000000123456789"
            let body = #"{"user_id": \#(bareID), "transaction_id": "\#(transaction)"}"#
            let associated = try await call(client, "associate-user", body)
            #expect(associated.status == 200)
            #expect(associated.json["success"] as? Bool == true)
            let user = try #require(associated.json["user"] as? [String: Any])
            #expect(user["id"] as? Int == bareID && user["transaction_id"] as? String == transaction)
            #expect(Set(user.keys) == ["id", "transaction_id"])
            let again = try await call(client, "associate-user", body)
            #expect(again.status == 200 && again.json["success"] as? Bool == true)

            #expect(try await env.eventually { try purchases(gateway).count == 1 })
            let purchase = try #require(try purchases(gateway).first)
            #expect(purchase["app_user_id"] as String? == String(bareID))
            #expect(purchase["transaction_ref"] as String? == transaction)
            #expect(purchase["keyword_id"] as Int64? == 555)
            #expect(purchase["campaign_id"] as Int64? == 542_370_539)
            #expect(purchase["attributed"] as Int? == 1)

            // The same transaction cannot also belong to another user.
            let stolen = try await call(
                client, "associate-user", #"{"user_id": \#(userID), "transaction_id": "\#(transaction)"}"#)
            #expect(stolen.status == 409)
            #expect((stolen.json["error"] as? [String: Any])?["field"] as? String == "transaction_id")
            // However it is spelt.
            for spelling in [" \(transaction)", "0\(transaction)", "\(transaction)\n"] {
                let body = #"{"user_id": \#(userID), "transaction_id": \#(JSONValue.string(spelling).jsonText)}"#
                #expect(try await call(client, "associate-user", body).status == 409, "\(spelling)")
            }
            #expect(try await env.eventually { try purchases(gateway).count == 1 })
        }
    }

    func purchases(_ gateway: Gateway) throws -> [Row] {
        try gateway.sqlite!.pool.read { db in
            guard try db.tableExists("attribution_records") else { return [] }
            return try Row.fetchAll(db, sql: "SELECT * FROM attribution_records WHERE kind = 'purchase'")
        }
    }

    /// The resolutions of a user's records delivered to the SQLite sink.
    func resolutions(_ gateway: Gateway, user: Int) throws -> [String] {
        try gateway.sqlite!.pool.read { db in
            guard try db.tableExists("attribution_records") else { return [] }
            return try String.fetchAll(
                db, sql: "SELECT resolution FROM attribution_records WHERE app_user_id = ?", arguments: [String(user)])
        }
    }

    /// The store's own copy of the one purchase: its record id and body.
    func purchaseBody(_ gateway: Gateway) throws -> (id: String, body: String, raw: Data?)? {
        try gateway.sqlite!.pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT record_id, body, raw FROM records WHERE json_extract(body, '$.kind') = 'purchase'"
            ).map { ($0["record_id"], $0["body"], $0["raw"]) }
        }
    }

    /// The SDK sends a fresh token at every launch until the answer is resolved: while
    /// the first is still waiting for Apple, the user keeps that one, and gets one install.
    @Test func aUserWhoseTokenIsWaitingGetsOneInstallHoweverManyTokensFollow() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let apple = FakeAppleAdServices()
        let first = AdServicesEndToEndTests.token("sdk-waiting")
        let relaunch = AdServicesEndToEndTests.token("sdk-relaunch")
        // Apple keeps the first token's answer until the relaunches are done.
        apple.held.withLock { $0 = [first] }
        try await harness.withGateway(apple, env: env, options: Self.sdkNotWaiting) { client, gateway in
            let userID = try #require(try await call(client, "create-user", "{}").json["userId"] as? Int)
            let resolve = { (token: String) in
                try await call(
                    client, "resolve-asa-attribution", #"{"user_id": \#(userID), "asa_attribution_token": "\#(token)"}"#
                )
            }
            #expect(try await resolve(first).json["asaAttributionResolved"] as? Bool == false)
            for _ in 0..<3 {
                let again = try await resolve(relaunch)
                #expect(again.status == 200 && again.json["asaAttributionResolved"] as? Bool == false)
            }
            #expect(apple.calls(relaunch) == 0)
            apple.held.withLock { $0 = [] }
            #expect(
                try await env.eventually { try await resolve(relaunch).json["asaAttributionResolved"] as? Bool == true }
            )
            #expect(apple.calls(relaunch) == 0)
            let installs = try await gateway.sqlite!.pool.read { db in
                try Int.fetchOne(
                    db, sql: "SELECT COUNT(*) FROM attribution_records WHERE app_user_id = ? AND kind = 'install'",
                    arguments: [String(userID)])
            }
            #expect(installs == 1)
        }
    }

    /// A token Apple answered `404` to through every retry is no answer: the user is not
    /// organic for good, and the next launch's token goes to Apple.
    @Test func aUserWhoseTokenWasNotFoundIsAskedAgainWithTheNextToken() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let apple = FakeAppleAdServices()
        let lost = AdServicesEndToEndTests.token("sdk-not-found")
        let next = AdServicesEndToEndTests.token("sdk-next-launch")
        apple.script(lost, [.notFound, .notFound, .notFound])
        let options = Self.sdk.merging(["not_found_retries": "2"]) { $1 }
        try await harness.withGateway(apple, env: env, options: options) { client, gateway in
            let created = try await call(client, "create-user", #"{"asa_attribution_token": "\#(lost)"}"#)
            let userID = try #require(created.json["userId"] as? Int)
            let body = { (token: String) in #"{"user_id": \#(userID), "asa_attribution_token": "\#(token)"}"# }
            let resolve = { (token: String) in try await call(client, "resolve-asa-attribution", body(token)) }
            // Apple's retries run out: recorded not_found, and still not resolved for the SDK.
            #expect(try await env.eventually { try resolutions(gateway, user: userID) == ["not_found"] })
            #expect(apple.calls(lost) == 3)
            let again = try await resolve(lost)
            #expect(again.json["asaAttributionResolved"] as? Bool == false)
            #expect(again.json["didUserComeFromAsa"] as? Bool == false)
            #expect(apple.calls(lost) == 3)
            // The next launch's token is sent to Apple, which attributes it.
            var answer: [String: Any] = [:]
            #expect(
                try await env.eventually {
                    answer = try await resolve(next).json
                    return answer["asaAttributionResolved"] as? Bool == true
                })
            #expect(answer["didUserComeFromAsa"] as? Bool == true)
            #expect(apple.calls(next) == 1)
        }
    }

    /// A purchase made while the user's token waited for Apple was stored `pending` with
    /// no campaign, and stayed so in every sink: once Apple answers, it carries the keyword.
    @Test func aPurchaseMadeWhileTheTokenWaitedIsCreditedWhenAppleAnswers() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        // Every answer names keyword 888: a held call the gateway gave up on is asked again.
        let apple = FakeAppleAdServices(fallback: .attributed(keywordID: 888))
        let token = AdServicesEndToEndTests.token("sdk-bought-early")
        // Apple keeps its answer until the purchase is in.
        apple.held.withLock { $0 = [token] }
        try await harness.withGateway(apple, env: env, options: Self.sdkNotWaiting) { client, gateway in
            let created = try await call(client, "create-user", #"{"asa_attribution_token": "\#(token)"}"#)
            #expect(created.json["asaAttributionResolved"] as? Bool == false)
            let userID = try #require(created.json["userId"] as? Int)
            let associated = try await call(
                client, "associate-user", #"{"user_id": \#(userID), "transaction_id": "2000000000000777"}"#)
            #expect(associated.status == 200)
            // Stored meanwhile as the purchase of a user whose token waits.
            let stored = try await gateway.sqlite!.pool.read { db in
                try String.fetchAll(
                    db,
                    sql:
                        "SELECT json_extract(body, '$.resolution') FROM records WHERE json_extract(body, '$.kind') = 'purchase'"
                )
            }
            #expect(stored == ["pending"])
            apple.held.withLock { $0 = [] }
            #expect(
                try await env.eventually {
                    try purchases(gateway).first.map { ($0["keyword_id"] as Int64?) == 888 } ?? false
                })
            let purchase = try #require(try purchases(gateway).first)
            #expect(purchase["attributed"] as Int? == 1 && purchase["campaign_id"] as Int64? == 542_370_539)
            #expect(try purchases(gateway).count == 1)
            #expect(purchase["resolution"] as String? == "resolved")
        }
    }

    /// A gateway stopped between Apple's answer and its crediting (a crash, a busy store)
    /// left the purchase `pending` in every sink until the user bought again, which many
    /// never do: the next start credits it.
    @Test func aPurchaseLeftPendingByAStoppedGatewayIsCreditedAtTheNextStart() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let apple = FakeAppleAdServices(fallback: .attributed(keywordID: 888))
        let token = AdServicesEndToEndTests.token("sdk-crash-before-credit")
        apple.held.withLock { $0 = [token] }
        try await harness.withGateway(apple, env: env, options: Self.sdkNotWaiting) { client, gateway in
            let created = try await call(client, "create-user", #"{"asa_attribution_token": "\#(token)"}"#)
            let userID = try #require(created.json["userId"] as? Int)
            #expect(
                try await call(
                    client, "associate-user", #"{"user_id": \#(userID), "transaction_id": "2000000000000778"}"#
                ).status == 200)
            let waiting = try #require(try purchaseBody(gateway))
            apple.held.withLock { $0 = [] }
            #expect(
                try await env.eventually {
                    try purchaseBody(gateway)?.body.contains(#""resolution":"resolved""#) == true
                })
            // The store as a stop right after Apple's answer left it: the answer kept, the
            // user linked to it, their purchase as it was before the crediting.
            try await gateway.sqlite!.pool.write { db in
                try db.execute(
                    sql: "UPDATE records SET body = ?, raw = ? WHERE record_id = ?",
                    arguments: [waiting.body, waiting.raw, waiting.id])
            }
        }
        try await harness.withGateway(apple, env: env, options: Self.sdk) { _, gateway in
            #expect(
                try await env.eventually {
                    try purchaseBody(gateway)?.body.contains(#""resolution":"resolved""#) == true
                })
            // The sink gets the credited version (after the outbox's older one, at worst).
            #expect(
                try await env.eventually {
                    try purchases(gateway).first.map { ($0["keyword_id"] as Int64?) == 888 } ?? false
                })
            let purchase = try #require(try purchases(gateway).first)
            #expect(purchase["resolution"] as String? == "resolved")
            #expect(try purchases(gateway).count == 1)
        }
    }

    /// The SDK's key ships in every install: with ids counting up, anyone could read
    /// whether user N came from an ad, or put their own token on N's attribution.
    @Test func userIdsCannotBeGuessed() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await harness.withGateway(FakeAppleAdServices(), env: env, options: Self.sdk) { client, _ in
            var ids: [Int] = []
            for _ in 0..<20 {
                ids.append(try #require(try await call(client, "create-user", "").json["userId"] as? Int))
            }
            #expect(Set(ids).count == 20)
            // Exact in every JSON reader (below 2^53), and scattered over that range.
            #expect(ids.allSatisfy { $0 > 0 && $0 < 1 << 53 })
            #expect(ids.filter { $0 > 1 << 40 }.count >= 15, "\(ids)")
            let sorted = ids.sorted()
            #expect(zip(sorted, sorted.dropFirst()).allSatisfy { $1 - $0 > 1_000 }, "\(sorted)")
            // The first users of a store are not 1, 2, 3.
            let guessed = try await call(
                client, "resolve-asa-attribution", #"{"user_id": 1, "asa_attribution_token": "QUJD"}"#)
            #expect(guessed.status == 404)
        }
    }

    @Test(arguments: [
        ("resolve-asa-attribution", #"{"user_id": 999, "asa_attribution_token": "QUJD"}"#, 404, "user_id"),
        ("resolve-asa-attribution", #"{"asa_attribution_token": "QUJD"}"#, 422, "user_id"),
        ("resolve-asa-attribution", #"{"user_id": "abc", "asa_attribution_token": "QUJD"}"#, 422, "user_id"),
        ("resolve-asa-attribution", #"{"user_id": USER}"#, 422, "asa_attribution_token"),
        ("resolve-asa-attribution", #"{"user_id": USER, "asa_attribution_token": 5}"#, 422, "asa_attribution_token"),
        ("associate-user", #"{"user_id": USER}"#, 422, "transaction_id"),
        ("associate-user", #"{"user_id": USER, "transaction_id": true}"#, 422, "transaction_id"),
        ("associate-user", #"{"user_id": USER, "transaction_id": " "}"#, 422, "transaction_id"),
        ("associate-user", #"{"user_id": USER, "transaction_id": "\u2063"}"#, 422, "transaction_id"),
        ("associate-user", #"{"user_id": USER, "transaction_id": "GPA.1234"}"#, 422, "transaction_id"),
        ("associate-user", #"{"user_id": 999, "transaction_id": "1"}"#, 404, "user_id"),
        ("create-user", #"{"asa_attribution_token": "not a token!"}"#, 422, "asa_attribution_token"),
    ])
    func badCallsGetAnErrorNamingTheField(function: String, body: String, status: Int, field: String) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let apple = FakeAppleAdServices()
        try await harness.withGateway(apple, env: env, options: Self.sdk) { client, gateway in
            let user = try await call(client, "create-user", "")
            let id = try #require(user.json["userId"] as? Int)
            let answer = try await call(client, function, body.replacingOccurrences(of: "USER", with: "\(id)"))
            #expect(answer.status == status)
            let error = try #require(answer.json["error"] as? [String: Any])
            #expect(error["field"] as? String == field)
            // A refused call creates no user.
            let users = try await DatabaseQueue(path: env.databasePath).read { db in
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM sdk_users")
            }
            #expect(users == 1)
        }
        #expect(apple.totalCalls == 0)
    }

    @Test func withoutAnSDKAppTheFunctionsAreNotServed() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await harness.withGateway(FakeAppleAdServices(), env: env) { client, _ in
            let answer = try await call(client, "create-user", "{}")
            #expect(answer.status == 404)
        }
    }
}
