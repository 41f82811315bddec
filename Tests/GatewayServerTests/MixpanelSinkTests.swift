import Foundation
import GatewayCore
import GatewaySinks
import Hummingbird
import HummingbirdTesting
import Synchronization
import Testing

/// The Mixpanel sink against a local `/engage` that validates like Mixpanel does: it
/// answers `200` with a verbose status, and refuses a whole request when one update in
/// it is malformed.
@Suite struct MixpanelSinkTests {
    static let token = "mp-project-token-0123"

    final class FakeMixpanel: Sendable {
        let bodies = Mutex<[Data]>([])
        let queries = Mutex<[String]>([])
        let statusOverride = Mutex<[Int]>([])

        func router() -> Router<BasicRequestContext> {
            let router = Router()
            router.post("/engage") { request, _ -> Response in
                self.queries.withLock { $0.append(request.uri.query ?? "") }
                if let status = self.statusOverride.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                    return Response(status: .init(code: status), headers: [.retryAfter: "3"])
                }
                guard request.headers[.contentType] == "application/json" else {
                    return Self.answer(0, "expected application/json")
                }
                let body = try await request.body.collect(upTo: 10 << 20)
                guard let updates = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [[String: Any]]
                else { return Self.answer(0, "body must be a JSON array") }
                let data = Data(body.readableBytesView)
                self.bodies.withLock { $0.append(data) }
                for update in updates {
                    guard update["$token"] as? String == MixpanelSinkTests.token else {
                        return Self.answer(0, "invalid token")
                    }
                    guard let id = update["$distinct_id"] as? String, !id.hasPrefix("bad") else {
                        return Self.answer(0, "$distinct_id is invalid")
                    }
                    let operations = update.keys.filter { $0.hasPrefix("$set") }
                    guard operations.count == 1 else { return Self.answer(0, "one operation per update") }
                }
                return Self.answer(1, nil)
            }
            return router
        }

        /// The update arrays received, in order.
        var requests: [[[String: Any]]] {
            bodies.withLock { $0 }.compactMap { try? JSONSerialization.jsonObject(with: $0) as? [[String: Any]] }
        }

        func answerNext(_ statuses: [Int]) {
            statusOverride.withLock { $0 = statuses }
        }

        static func answer(_ status: Int, _ error: String?) -> Response {
            let json = error.map { #"{"status":\#(status),"error":"\#($0)"}"# } ?? #"{"status":\#(status),"error":null}"#
            return Response(
                status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: json)))
        }
    }

    func record(user: String?, keyword: String? = "meditation app") -> AttributionRecord {
        var record = AttributionRecord(
            provider: "iad", kind: .install, dedupeKey: "iad:1:\(user ?? "none")-\(UUID())", receivedAt: Date(),
            attributed: true)
        record.appUserID = user
        record.campaignID = 542_370_539
        record.keywordID = 87_675_432
        record.keyword = keyword
        record.countryOrRegion = "US"
        record.conversionType = "Download"
        return record
    }

    func run(_ body: @escaping @Sendable (FakeMixpanel, MixpanelSink) async throws -> Void) async throws {
        let fake = FakeMixpanel()
        try await Application(router: fake.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            .test(.live) { client in
                let port = try #require(client.port)
                try await body(fake, MixpanelSink(options: .init(token: Self.token, endpoint: "http://127.0.0.1:\(port)")))
            }
    }

    @Test func sendsFirstTouchAttributionAndNamesAsProfileUpdates() async throws {
        try await run { fake, sink throws in
            #expect(try await sink.deliver([record(user: "user-42")]) == [.delivered])
            #expect(fake.queries.withLock { $0 } == ["verbose=1&ip=0"])
            let updates = try #require(fake.requests.first)
            #expect(updates.count == 2)
            let once = try #require(updates.first { $0["$set_once"] != nil }?["$set_once"] as? [String: Any])
            #expect(once["asa_attribution"] as? Bool == true)
            #expect(once["asa_campaign_id"] as? Int == 542_370_539)
            #expect(once["asa_keyword_id"] as? Int == 87_675_432)
            #expect(once["asa_country"] as? String == "US")
            #expect(once["asa_conversion_type"] as? String == "Download")
            let set = try #require(updates.first { $0["$set"] != nil }?["$set"] as? [String: Any])
            #expect(set["asa_keyword"] as? String == "meditation app")
            #expect(updates.allSatisfy { $0["$distinct_id"] as? String == "user-42" && $0["$token"] as? String == Self.token })
        }
    }

    @Test func aMalformedRecordIsRejectedWithMixpanelsErrorAndTheOthersAreDelivered() async throws {
        try await run { fake, sink throws in
            let outcomes = try await sink.deliver([record(user: "u1"), record(user: "bad-user"), record(user: "u3")])
            #expect(outcomes == [.delivered, .reject(reason: "Mixpanel: $distinct_id is invalid"), .delivered])
        }
    }

    @Test func recordsWithoutARealUserAreNotSent() async throws {
        try await run { fake, sink throws in
            let outcomes = try await sink.deliver([record(user: nil), record(user: "anon"), record(user: "0")])
            #expect(outcomes == [.delivered, .delivered, .delivered])
            #expect(fake.requests.isEmpty)
        }
    }

    @Test func throttlingIsRetriedAfterMixpanelsDelay() async throws {
        try await run { fake, sink throws in
            fake.answerNext([429, 503])
            #expect(try await sink.deliver([record(user: "u1")]) == [.retry(reason: "Mixpanel answered 429", after: .seconds(3))])
            #expect(try await sink.deliver([record(user: "u1")]) == [.retry(reason: "Mixpanel answered 503", after: .seconds(3))])
            #expect(try await sink.deliver([record(user: "u1")]) == [.delivered])
        }
    }
}
