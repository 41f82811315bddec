import Foundation
import GatewayCore
@testable import GatewaySinks
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
        /// The `Retry-After` an overridden `/engage` answer carries, if any.
        let engageRetryAfter = Mutex<String?>("3")
        /// `/import` requests: authorization, query and events.
        let importBodies = Mutex<[(query: String, body: Data)]>([])
        let importStatus = Mutex<[Int]>([])
        /// Whole answers to give `/import` next, before any validation.
        let importAnswers = Mutex<[(status: Int, body: String)]>([])
        /// The keys `/import` names a failed event by: Mixpanel's pages give `index` with
        /// `$insert_id` or `insert_id`.
        let failureKeys = Mutex(["index", "$insert_id"])

        func router() -> Router<BasicRequestContext> {
            let router = Router()
            router.post("/engage") { request, _ -> Response in
                self.queries.withLock { $0.append(request.uri.query ?? "") }
                if let status = self.statusOverride.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                    let wait = self.engageRetryAfter.withLock { $0 }
                    return Response(status: .init(code: status), headers: wait.map { [.retryAfter: $0] } ?? [:])
                }
                guard request.headers[.contentType] == "application/json" else {
                    return Self.answer(0, "expected application/json")
                }
                let body = try await request.body.collect(upTo: 10 << 20)
                guard
                    let updates = try JSONSerialization.jsonObject(with: Data(body.readableBytesView))
                        as? [[String: Any]]
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
                    let operations = update.keys.filter { $0.hasPrefix("$set") || $0 == "$delete" }
                    guard operations.count == 1 else { return Self.answer(0, "one operation per update") }
                }
                return Self.answer(1, nil)
            }
            // Validates as Mixpanel's strict import does and names failures by index.
            router.post("/import") { request, _ -> Response in
                if let status = self.importStatus.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                    return Response(status: .init(code: status))
                }
                if let answer = self.importAnswers.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                    return Response(
                        status: .init(code: answer.status), body: .init(byteBuffer: ByteBuffer(string: answer.body)))
                }
                let body = try await request.body.collect(upTo: 10 << 20)
                let expected = "Basic " + Data("\(MixpanelSinkTests.token):".utf8).base64EncodedString()
                guard request.headers[.authorization] == expected else { return Response(status: .unauthorized) }
                guard request.headers[.contentType] == "application/json",
                    let events = try JSONSerialization.jsonObject(with: Data(body.readableBytesView))
                        as? [[String: Any]]
                else { return Response(status: .badRequest) }
                let received = (query: request.uri.query ?? "", body: Data(body.readableBytesView))
                self.importBodies.withLock { $0.append(received) }
                var failures: [String] = []
                for (index, event) in events.enumerated() {
                    let properties = event["properties"] as? [String: Any] ?? [:]
                    let insertID = properties["$insert_id"] as? String ?? ""
                    let valid =
                        insertID.count <= 36 && !insertID.isEmpty
                        && insertID.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
                    var problem: (String, String)?
                    if event["event"] as? String == nil { problem = ("event", "missing") }
                    if properties["time"] as? Int == nil { problem = ("properties.time", "missing") }
                    if (properties["distinct_id"] as? String ?? "").isEmpty {
                        problem = ("properties.distinct_id", "missing")
                    }
                    if !valid { problem = ("properties.$insert_id", "invalid") }
                    if properties["asa_keyword"] as? String == "reject-me" {
                        problem = ("properties.asa_keyword", "value rejected")
                    }
                    if let (field, message) = problem {
                        let keys = self.failureKeys.withLock { $0 }
                        let naming = keys.map { $0 == "index" ? #""index":\#(index)"# : #""\#($0)":"\#(insertID)""# }
                        failures.append(
                            "{" + (naming + [#""field":"\#(field)","message":"\#(message)""#]).joined(separator: ",")
                                + "}")
                    }
                }
                let imported = events.count - failures.count
                let json =
                    failures.isEmpty
                    ? #"{"code":200,"num_records_imported":\#(imported),"status":"OK"}"#
                    : #"{"code":400,"error":"some data points in the request failed validation","status":"Bad Request","num_records_imported":\#(imported),"failed_records":[\#(failures.joined(separator: ","))]}"#
                return Response(
                    status: failures.isEmpty ? .ok : .badRequest, headers: [.contentType: "application/json"],
                    body: .init(byteBuffer: ByteBuffer(string: json)))
            }
            return router
        }

        /// The `/import` requests received, in order.
        var imports: [(query: String, events: [[String: Any]])] {
            importBodies.withLock { $0 }.map { request in
                (request.query, (try? JSONSerialization.jsonObject(with: request.body) as? [[String: Any]]) ?? [])
            }
        }

        /// The update arrays received, in order.
        var requests: [[[String: Any]]] {
            bodies.withLock { $0 }.compactMap { try? JSONSerialization.jsonObject(with: $0) as? [[String: Any]] }
        }

        /// The profiles Mixpanel holds after the updates received, in order: `$set_once` sets
        /// a property only where the profile has none, `$set` always.
        var profiles: [String: [String: Any]] {
            var profiles: [String: [String: Any]] = [:]
            for update in requests.joined() {
                guard let user = update["$distinct_id"] as? String else { continue }
                var profile = profiles[user] ?? [:]
                for (name, value) in update["$set_once"] as? [String: Any] ?? [:] where profile[name] == nil {
                    profile[name] = value
                }
                for (name, value) in update["$set"] as? [String: Any] ?? [:] { profile[name] = value }
                profiles[user] = profile
            }
            return profiles
        }

        func answerNext(_ statuses: [Int]) {
            statusOverride.withLock { $0 = statuses }
        }

        static func answer(_ status: Int, _ error: String?) -> Response {
            let json =
                error.map { #"{"status":\#(status),"error":"\#($0)"}"# } ?? #"{"status":\#(status),"error":null}"#
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: json)))
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

    func run(
        eventName: String? = nil, _ body: @escaping @Sendable (FakeMixpanel, MixpanelSink) async throws -> Void
    ) async throws {
        let fake = FakeMixpanel()
        try await Application(router: fake.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            .test(.live) { client in
                let port = try #require(client.port)
                let options = MixpanelSink.Options(
                    token: Self.token, endpoint: "http://127.0.0.1:\(port)", eventName: eventName)
                try await body(fake, MixpanelSink(options: options))
            }
    }

    @Test func sendsFirstTouchAttributionAndNamesAsProfileUpdates() async throws {
        try await run { fake, sink throws in
            #expect(try await sink.deliver([record(user: "user-42")]) == [.delivered])
            #expect(fake.queries.withLock { $0 } == ["verbose=1&ip=0"])
            let updates = try #require(fake.requests.first)
            #expect(updates.count == 2)
            let once = try #require(updates.first { $0["$set_once"] != nil }?["$set_once"] as? [String: Any])
            #expect(once["asa_campaign_id"] as? Int == 542_370_539)
            #expect(once["asa_keyword_id"] as? Int == 87_675_432)
            #expect(once["asa_country"] as? String == "US")
            #expect(once["asa_conversion_type"] as? String == "Download")
            let set = try #require(updates.first { $0["$set"] != nil }?["$set"] as? [String: Any])
            #expect(set["asa_keyword"] as? String == "meditation app")
            // Set, not set once: it outranks an earlier failure's `false`.
            #expect(set["asa_attribution"] as? Bool == true)
            #expect(
                updates.allSatisfy {
                    $0["$distinct_id"] as? String == "user-42" && $0["$token"] as? String == Self.token
                })
        }
    }

    /// A view-through install has no click: its date is the impression's, under its own name.
    @Test func aViewThroughInstallCarriesItsImpressionDate() async throws {
        try await run(eventName: "Attribution") { fake, sink throws in
            var viewed = record(user: "user-v")
            viewed.provider = "adservices"
            viewed.claimType = "Impression"
            viewed.impressionDate = ISO8601.parse("2025-03-10T08:15:00Z")
            #expect(try await sink.deliver([viewed]) == [.delivered])
            let update = fake.requests.joined().first { $0["$set_once"] != nil }
            let once = try #require(update?["$set_once"] as? [String: Any])
            #expect(once["asa_claim_type"] as? String == "Impression")
            #expect(once["asa_impression_date"] as? String == "2025-03-10T08:15:00Z")
            #expect(once["asa_click_date"] == nil)
            let event = try #require(fake.imports.flatMap(\.events).first?["properties"] as? [String: Any])
            #expect(event["asa_impression_date"] as? String == "2025-03-10T08:15:00Z")
        }
    }

    func unresolved(_ resolution: Resolution, user: String) -> AttributionRecord {
        var record = AttributionRecord(
            provider: "adservices", kind: .purchase, dedupeKey: "adservices:purchase:\(UUID())",
            receivedAt: Date(), attributed: false, resolution: resolution)
        record.appUserID = user
        return record
    }

    /// A pending record does not know how the user arrived; Apple's `not_found` and
    /// `invalid` put the user in the `asa_attribution = false` cohort, saying why, and an
    /// attributed answer that comes later (a new token) still takes the profile.
    @Test func failuresSetAttributionFalseOnceAndALaterAnswerStillCounts() async throws {
        try await run(eventName: "ASA Purchase") { fake, sink throws in
            #expect(try await sink.deliver([unresolved(.pending, user: "waiting")]) == [.delivered])
            #expect(fake.requests.isEmpty)

            let failed = [unresolved(.notFound, user: "user-7"), unresolved(.invalid, user: "user-8")]
            #expect(try await sink.deliver(failed) == [.delivered, .delivered])
            #expect(fake.profiles["user-7"]?["asa_attribution"] as? Bool == false)
            #expect(fake.profiles["user-7"]?["asa_resolution"] as? String == "not_found")
            #expect(fake.profiles["user-8"]?["asa_attribution"] as? Bool == false)
            #expect(fake.profiles["user-8"]?["asa_resolution"] as? String == "invalid")
            #expect(fake.requests.joined().allSatisfy { $0["$set"] == nil })

            // Apple attributes user-7's next token: the failure's false does not keep it out.
            var answer = record(user: "user-7")
            answer.provider = "adservices"
            #expect(try await sink.deliver([answer]) == [.delivered])
            let profile = try #require(fake.profiles["user-7"])
            #expect(profile["asa_attribution"] as? Bool == true)
            #expect(profile["asa_resolution"] as? String == "resolved")
            #expect(profile["asa_campaign_id"] as? Int == 542_370_539)
            // user-8's next token is organic: still false, now a final answer.
            var organic = AttributionRecord(
                provider: "adservices", kind: .install, dedupeKey: "adservices:\(UUID())", receivedAt: Date(),
                attributed: false)
            organic.appUserID = "user-8"
            // An attributed user's later failure changes nothing.
            let later = try await sink.deliver([organic, unresolved(.notFound, user: "user-7")])
            #expect(later == [.delivered, .delivered])
            #expect(fake.profiles["user-8"]?["asa_attribution"] as? Bool == false)
            #expect(fake.profiles["user-8"]?["asa_resolution"] as? String == "resolved")
            #expect(fake.profiles["user-7"]?["asa_attribution"] as? Bool == true)
            #expect(fake.profiles["user-7"]?["asa_resolution"] as? String == "resolved")

            // The events are still sent, and one whose record is not final has no asa_* properties.
            let events = fake.imports.flatMap(\.events).compactMap { $0["properties"] as? [String: Any] }
            let resolutions = events.map { $0["gateway_resolution"] as? String }
            #expect(resolutions == ["pending", "not_found", "invalid", "resolved", "resolved", "not_found"])
            let unfinished = events.filter { $0["gateway_resolution"] as? String != "resolved" }
            #expect(unfinished.allSatisfy { $0.keys.allSatisfy { !$0.hasPrefix("asa_") } })
            #expect(events[3]["asa_attribution"] as? Bool == true)
        }
    }

    @Test func aMalformedRecordIsRejectedWithMixpanelsErrorAndTheOthersAreDelivered() async throws {
        try await run { fake, sink throws in
            let outcomes = try await sink.deliver([record(user: "u1"), record(user: "bad-user"), record(user: "u3")])
            #expect(outcomes == [.delivered, .reject(reason: "Mixpanel: $distinct_id is invalid"), .delivered])
        }
    }

    /// Mixpanel refuses a batch whole for one bad update. Sent again one record at a time,
    /// one bad record in 64 would cost 65 requests; halving finds it in about two per level.
    @Test func oneRefusedRecordInABatchIsFoundByHalvingNotOneRequestPerRecord() async throws {
        try await run { fake, sink throws in
            let users = (0..<64).map { $0 == 41 ? "bad-user" : "u\($0)" }
            let outcomes = try await sink.deliver(users.map { record(user: $0) })
            #expect(outcomes[41] == .reject(reason: "Mixpanel: $distinct_id is invalid"))
            #expect(outcomes.enumerated().allSatisfy { $0.offset == 41 || $0.element == .delivered })
            // The whole batch, two halves at each of four levels, then the four alone.
            #expect(fake.queries.withLock { $0.count } == 13)
            // Every record refused: halves of four or fewer are sent record by record, not
            // halved down to one, which for eight records would take 15 requests, not 11.
            let before = fake.queries.withLock { $0.count }
            let allBad = try await sink.deliver((0..<8).map { record(user: "bad-\($0)") })
            #expect(allBad.allSatisfy { if case .reject = $0 { true } else { false } })
            #expect(fake.queries.withLock { $0.count } - before == 11)
        }
    }

    /// Mixpanel asks for 2 s at least before a retry, whether or not it says how long.
    @Test func throttlingWithoutRetryAfterWaitsTwoSeconds() async throws {
        try await run { fake, sink throws in
            fake.engageRetryAfter.withLock { $0 = nil }
            fake.answerNext([429])
            #expect(
                try await sink.deliver([record(user: "u1")]) == [
                    .retry(reason: "Mixpanel answered 429", after: .seconds(2))
                ])
        }
    }

    /// A record whose profile update and event both wait waits for the longer of the two.
    @Test func aRecordWaitsForTheLongerOfItsTwoRetries() {
        let profile = DeliveryOutcome.retry(reason: "Mixpanel answered 503", after: .seconds(2))
        let event = DeliveryOutcome.retry(reason: "Mixpanel /import answered 429", after: .seconds(12))
        let both = DeliveryOutcome.retry(
            reason: "Mixpanel answered 503; Mixpanel /import answered 429", after: .seconds(12))
        #expect(MixpanelSink.combine(profile, event) == both)
        #expect(MixpanelSink.combine(event, profile).retryAfter == .seconds(12))
        // A record's own retry (nil) yields to a destination's wait.
        #expect(MixpanelSink.combine(.retry(reason: "a"), event).retryAfter == .seconds(12))
        #expect(MixpanelSink.combine(.retry(reason: "a"), .retry(reason: "a")) == .retry(reason: "a"))
    }

    @Test func recordsWithoutARealUserAreNotSent() async throws {
        try await run { fake, sink throws in
            // A forgotten user's stand-in id names nobody either (a `replay` after a forget).
            let outcomes = try await sink.deliver([
                record(user: nil), record(user: "anon"), record(user: "0"),
                record(user: "forgotten-" + UUID().uuidString.lowercased()),
            ])
            // Counted apart from what Mixpanel holds.
            #expect(
                outcomes
                    == Array(repeating: .declined(reason: "no real user id: nothing is sent to Mixpanel"), count: 4))
            #expect(fake.requests.isEmpty)
        }
    }

    @Test func throttlingIsRetriedAfterMixpanelsDelay() async throws {
        try await run { fake, sink throws in
            fake.answerNext([429, 503])
            #expect(
                try await sink.deliver([record(user: "u1")]) == [
                    .retry(reason: "Mixpanel answered 429", after: .seconds(3))
                ])
            #expect(
                try await sink.deliver([record(user: "u1")]) == [
                    .retry(reason: "Mixpanel answered 503", after: .seconds(3))
                ])
            #expect(try await sink.deliver([record(user: "u1")]) == [.delivered])
        }
    }

    // MARK: events through /import

    @Test func eachRecordIsAlsoAnEventWithAStableInsertID() async throws {
        try await run(eventName: "ASA Install") { fake, sink throws in
            let batch = [record(user: "u1"), record(user: "u2"), record(user: nil)]
            let outcomes: [DeliveryOutcome] = [
                .delivered, .delivered, .declined(reason: "no real user id: nothing is sent to Mixpanel"),
            ]
            #expect(try await sink.deliver(batch) == outcomes)
            // A retry of the same batch carries the same $insert_id, which Mixpanel dedupes on.
            #expect(try await sink.deliver(batch) == outcomes)
            let imports = fake.imports
            #expect(imports.count == 2)
            #expect(imports.allSatisfy { $0.query == "strict=1" })
            let events = try #require(imports.first?.events)
            #expect(events.count == 2)
            let first = try #require(events.first?["properties"] as? [String: Any])
            #expect(events.first?["event"] as? String == "ASA Install")
            #expect(first["distinct_id"] as? String == "u1")
            #expect(first["$insert_id"] as? String == batch[0].recordID)
            #expect(first["time"] as? Int == Int((batch[0].receivedAt.timeIntervalSince1970 * 1000).rounded()))
            #expect(first["asa_campaign_id"] as? Int == 542_370_539)
            #expect(first["asa_keyword"] as? String == "meditation app")
            let again = try #require(
                imports.last?.events.compactMap { ($0["properties"] as? [String: Any])?["$insert_id"] as? String })
            #expect(again == [batch[0].recordID, batch[1].recordID])
        }
    }

    @Test func anEventIsDatedWhenItHappenedAndKeepsThatTimeOnRetry() async throws {
        try await run(eventName: "ASA Event") { fake, sink throws in
            let arrived = Date(timeIntervalSince1970: 1_763_900_000.25)
            func make(
                _ kind: RecordKind, user: String, _ fill: (inout AttributionRecord) -> Void = { _ in }
            ) -> AttributionRecord {
                var record = AttributionRecord(
                    provider: "s2s", kind: kind, dedupeKey: "s2s:\(UUID())", receivedAt: arrived)
                record.appUserID = user
                fill(&record)
                return record
            }
            let dayBefore = arrived.addingTimeInterval(-86_400 - 0.5)
            let installed = arrived.addingTimeInterval(-3 * 86_400)
            let batch = [
                // Posted a day late: it lands on the day it was bought.
                make(.purchase, user: "buyer") {
                    $0.purchaseDate = dayBefore; $0.conversionDate = installed
                },
                make(.install, user: "installer") {
                    $0.conversionDate = installed; $0.purchaseDate = dayBefore
                },
                make(.reinstall, user: "returner") { $0.conversionDate = installed },
                make(.session, user: "opener") { $0.conversionDate = installed },
                make(.purchase, user: "undated"),
                // A clock running ahead, and a date Mixpanel refuses: the arrival stands.
                make(.purchase, user: "ahead") { $0.purchaseDate = arrived.addingTimeInterval(600) },
                make(.purchase, user: "epoch") { $0.purchaseDate = Date(timeIntervalSince1970: 0) },
            ]
            #expect(try await sink.deliver(batch) == Array(repeating: .delivered, count: batch.count))
            #expect(try await sink.deliver(batch) == Array(repeating: .delivered, count: batch.count))

            func ms(_ date: Date) -> Int { Int((date.timeIntervalSince1970 * 1000).rounded()) }
            let imports = fake.imports
            #expect(imports.count == 2)
            let times = imports.map { request in
                request.events.map { ($0["properties"] as? [String: Any])?["time"] as? Int }
            }
            #expect(
                times.first == [
                    ms(dayBefore), ms(installed), ms(installed), ms(arrived), ms(arrived), ms(arrived), ms(arrived),
                ])
            // The retry carries the same time, which Mixpanel dedupes on with $insert_id.
            #expect(times.last == times.first)
        }
    }

    @Test func revenueReachesMixpanelAsTheAmountsOwnDigits() async throws {
        try await run(eventName: "ASA Purchase") { fake, sink throws in
            // Amounts whose Foundation conversion to Double is off in the last digits.
            let amounts = ["19.99", "49.99", "123456.789"]
            var batch = amounts.enumerated().map { index, amount in
                var purchase = record(user: "u\(index)")
                purchase.revenue = Decimal(string: amount)
                purchase.currency = "USD"
                return purchase
            }
            // A refund takes its amount back: Mixpanel's sum of revenue is what was kept.
            var refund = batch[0]
            refund.recordID = UUID().uuidString.lowercased()
            refund.kind = .refund
            batch.append(refund)
            #expect(try await sink.deliver(batch) == [.delivered, .delivered, .delivered, .delivered])
            let events = try #require(fake.imports.first?.events)
            let sent = events.map { ($0["properties"] as? [String: Any])?["revenue"] as? Double }
            #expect(sent == amounts.map { Double($0) } + [-19.99])
        }
    }

    @Test func anEventMixpanelRefusesIsDeadLetteredAloneWithItsMessage() async throws {
        try await run(eventName: "ASA Install") { fake, sink throws in
            let outcomes = try await sink.deliver(
                [record(user: "u1"), record(user: "u2", keyword: "reject-me"), record(user: "u3")])
            #expect(
                outcomes == [
                    .delivered, .reject(reason: "Mixpanel /import: properties.asa_keyword: value rejected"), .delivered,
                ])
        }
    }

    @Test(arguments: [["insert_id"], ["$insert_id"]])
    func anEventNamedOnlyByItsInsertIDIsDeadLetteredAlone(keys: [String]) async throws {
        try await run(eventName: "ASA Install") { fake, sink throws in
            fake.failureKeys.withLock { $0 = keys }
            let outcomes = try await sink.deliver(
                [record(user: "u1"), record(user: "u2", keyword: "reject-me"), record(user: "u3")])
            #expect(
                outcomes == [
                    .delivered, .reject(reason: "Mixpanel /import: properties.asa_keyword: value rejected"), .delivered,
                ])
        }
    }

    /// A refusal that names no event leaves unknown which events Mixpanel kept: none of the
    /// batch counts as delivered, and each is sent again.
    @Test func aRefusalThatNamesNoEventCountsNoneDelivered() async throws {
        try await run(eventName: "ASA Install") { fake, sink throws in
            fake.failureKeys.withLock { $0 = [] }
            let records = [record(user: "u1"), record(user: "u2", keyword: "reject-me"), record(user: "u3")]
            let outcomes = try await sink.deliver(records)
            #expect(
                outcomes
                    == Array(
                        repeating: .retry(
                            reason: "Mixpanel /import refused 1 of 3 events without naming each: sent again"),
                        count: 3))
        }
    }

    @Test func aProfileWaitingForARetryIsNotDeadLetteredWithItsRefusedEvent() async throws {
        try await run(eventName: "ASA Install") { fake, sink throws in
            // /engage is down while /import refuses the event: the profile must still go.
            fake.statusOverride.withLock { $0 = [503] }
            let record = record(user: "u2", keyword: "reject-me")
            #expect(
                try await sink.deliver([record]) == [
                    .retry(
                        reason: "Mixpanel answered 503; Mixpanel /import: properties.asa_keyword: value rejected",
                        after: .seconds(3))
                ])
            // Back: the profile goes, the event is refused again, and the record is dead-lettered for it.
            #expect(
                try await sink.deliver([record]) == [
                    .reject(reason: "Mixpanel /import: properties.asa_keyword: value rejected")
                ])
            #expect(fake.requests.count == 1)
        }
    }

    @Test func importThrottlingWaitsAtLeastTwoSeconds() async throws {
        try await run(eventName: "ASA Install") { fake, sink throws in
            fake.importStatus.withLock { $0 = [503] }
            #expect(
                try await sink.deliver([record(user: "u1")])
                    == [.retry(reason: "Mixpanel /import answered 503", after: .seconds(2))])
            #expect(try await sink.deliver([record(user: "u1")]) == [.delivered])
        }
    }

    /// A `2xx` is no proof the events are in Mixpanel unless it counts them: a proxy's
    /// `200 OK` page, or Mixpanel importing none, counted them delivered with nothing there.
    @Test func anImportAnswerThatDoesNotCountEveryEventIsRetried() async throws {
        try await run(eventName: "ASA Install") { fake, sink throws in
            fake.importAnswers.withLock {
                $0 = [(200, "OK"), (200, #"{"code":200,"num_records_imported":1,"status":"OK"}"#)]
            }
            let records = [record(user: "u1"), record(user: "u2")]
            let proxy = try await sink.deliver(records)
            #expect(
                proxy.allSatisfy {
                    if case .retry(let reason, _) = $0 {
                        reason.contains("without num_records_imported")
                    } else {
                        false
                    }
                })
            let partial = try await sink.deliver(records)
            #expect(
                partial.allSatisfy {
                    if case .retry(let reason, _) = $0 { reason.contains("1 of 2 events") } else { false }
                })
            #expect(try await sink.deliver(records) == [.delivered, .delivered])
        }
    }

    @Test func aRedirectIsRetriedAndNeverFollowedToAnotherHost() async throws {
        let trap = RedirectTrap(statuses: [307, 302, 308])
        try await trap.run(paths: ["/engage", "/import"]) { destination, elsewhere throws in
            let sink = MixpanelSink(
                options: .init(token: Self.token, endpoint: destination, eventName: "ASA Install"))
            // /engage answers 307 (which would send the updates, token and all, again) and
            // /import 302: the record waits for both, and says both.
            #expect(
                try await sink.deliver([record(user: "u1")])
                    == [
                        .retry(
                            reason: "Mixpanel answered 307 (a redirect to \(elsewhere), not followed); "
                                + "Mixpanel /import answered 302 (a redirect to \(elsewhere), not followed)",
                            after: .zero)
                    ])
            // A record without profile properties goes to /import alone.
            var event = AttributionRecord(provider: "s2s", kind: .event, dedupeKey: "s2s:\(UUID())", receivedAt: Date())
            event.appUserID = "u2"
            #expect(
                try await sink.deliver([event])
                    == [
                        .retry(
                            reason: "Mixpanel /import answered 308 (a redirect to \(elsewhere), not followed)",
                            after: .zero)
                    ])
        }
        #expect(trap.redirects == 3)
        // Neither the updates nor /import's Basic credentials went to the other host.
        #expect(trap.calls.map(\.method) == [])
    }

    /// "Mixpanel unreachable: IOError" did not tell a refused connection from a DNS or
    /// TLS failure; the system's reason does.
    @Test func anUnreachableMixpanelIsNamedWithTheSystemsReason() async throws {
        let sink = MixpanelSink(options: .init(token: Self.token, endpoint: "http://127.0.0.1:1"))
        await #expect {
            try await sink.deliver([record(user: "u1")])
        } throws: { error in
            "\(error)".contains("Connection refused")
        }
    }

    @Test func configuredNamesReplaceThePrefixedOnes() {
        var options = MixpanelSink.Options(token: Self.token, endpoint: "http://127.0.0.1:9")
        options.propertyNames = ["keyword": "Search Term"]
        let sink = MixpanelSink(options: options)
        let updates = sink.mapping.updates(for: record(user: "u1"))
        let set = updates.compactMap { $0["$set"] }.first
        #expect(set?["Search Term"] == .string("meditation app"))
        #expect(set?["asa_keyword"] == nil)
        #expect(updates.compactMap { $0["$set_once"] }.first?["asa_campaign_id"] == .integer(542_370_539))
    }

    @Test func insertIDsFitMixpanelsRules() {
        let uuid = AttributionRecord.newRecordID()
        #expect(MixpanelEventMapping.insertID(uuid) == uuid)
        let hashed = MixpanelEventMapping.insertID("skan:1234:transaction/with:odd chars and more than 36 bytes")
        #expect(hashed.count == 32 && hashed.allSatisfy { $0.isHexDigit })
    }

    @Test func fileModeWritesTheSameJSONAsNewlineDelimitedFiles() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mixpanel-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let now = Date(timeIntervalSince1970: 1_763_900_000)  // 2025-11-23
        // Nothing listens on this endpoint: file mode must not use the network.
        let sink = MixpanelSink(
            options: .init(
                token: Self.token, endpoint: "http://127.0.0.1:9", eventName: "ASA Install",
                mode: .file(directory: directory.path)),
            now: { now })
        #expect(try await sink.deliver([record(user: "u1"), record(user: "u2")]) == [.delivered, .delivered])
        #expect(try await sink.deliver([record(user: "u3")]) == [.delivered])

        func lines(_ name: String) throws -> [[String: Any]] {
            let text = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
            return try text.split(separator: "\n").map {
                try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
            }
        }
        let profiles = try lines("engage-2025-11-23.ndjson")
        #expect(profiles.count == 6)
        #expect(profiles.allSatisfy { $0["$token"] as? String == Self.token })
        let events = try lines("events-2025-11-23.ndjson")
        #expect(events.map { ($0["properties"] as? [String: Any])?["distinct_id"] as? String } == ["u1", "u2", "u3"])
    }
}

/// What `check-config` and the start log say of a destination shows no credentials.
@Suite struct SinkSummaryTests {
    /// A refusal's reason is kept and shown by `dlq list`: Mixpanel's own message when it
    /// gives one, and never the project token, whatever the answer quoted.
    @Test func aRefusalsReasonIsMixpanelsMessageWithoutTheToken() {
        let token = MixpanelSinkTests.token
        #expect(
            MixpanelRefusal.reason(#"{"error": "bad $distinct_id", "status": 0}"#, token: token) == "bad $distinct_id")
        let echoed = MixpanelRefusal.reason(#"{"error": "token \#(token) is not a project"}"#, token: token)
        #expect(!echoed.contains(token) && echoed.contains("<project token>"))
        let page = MixpanelRefusal.reason("<html>proxy refused Authorization for \(token)</html>", token: token)
        #expect(!page.contains(token))
        #expect(MixpanelRefusal.reason(String(repeating: "x", count: 1000), token: token).count == 200)
        // Not even its start, when the cut falls inside it.
        let straddling = MixpanelRefusal.reason(String(repeating: "x", count: 195) + token, token: token)
        #expect(!straddling.contains(token.prefix(5)))
    }

    @Test func aDestinationsCredentialsPathAndQueryNeverShow() {
        let url = "https://proxy-user:proxy-pass-123@proxy.example.com:8443/mp-s3cr3t?token=secret-token-456"
        let mixpanel = MixpanelSinkPlugin.summary(MixpanelSink.Options(token: "mp-token", endpoint: url))
        let webhook = WebhookSinkPlugin.summary(WebhookSink.Options(url: url, secret: "whsec-0123456789abcdef"))
        for summary in [mixpanel, webhook] {
            #expect(summary.contains("https://proxy.example.com:8443/…"), "\(summary)")
            #expect(
                !summary.contains("proxy-pass-123") && !summary.contains("secret-token-456")
                    && !summary.contains("s3cr3t"), "\(summary)")
        }
    }
}

extension DeliveryOutcome {
    /// The wait a retry asks for; nil for any other outcome or a record's own retry.
    fileprivate var retryAfter: Duration? {
        if case .retry(_, let after) = self { after } else { nil }
    }
}
