import Foundation
import GatewayCore
import Synchronization
import Testing

/// Forget requests, on every backend: the user's records keep no id of theirs, nothing of
/// theirs is sent after the request, the request waits in every sink's outbox, and the ids
/// go once every sink has answered.
@Suite struct ForgetConformanceTests {
    static let idfv = "6D92078A-8246-4BA4-AE5B-76104861E7DC"

    @Test(arguments: StoreBackend.available)
    func theUsersRecordsKeepNoIdOfTheirsAndTheRequestWaitsForEverySink(backend: StoreBackend) async throws {
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        var install = StoreConformanceTests.install("u1", at: clock.now)
        install.idfv = Self.idfv
        install.raw = .object(["app_user_id": .string("u1")])
        var purchase = AttributionRecord(
            provider: "s2s", kind: .purchase, dedupeKey: "s2s:purchase:1:T1", receivedAt: clock.now)
        purchase.appID = "1"
        purchase.appUserID = "u1"
        purchase.transactionID = "T1"
        purchase.revenue = Decimal(string: "4.99")
        // Its raw payload already removed by retention: the vendor's id is still the record's.
        purchase.vendorIDs = ["appsflyer_id": "af-1"]
        // Names only the device: found through the install, which names both.
        var session = AttributionRecord(
            provider: "s2s", kind: .session, dedupeKey: "s2s:session:\(Self.idfv)", receivedAt: clock.now)
        session.appID = "1"
        session.idfv = Self.idfv
        // Stored before the record kept vendor ids: its payload still names one.
        session.raw = .object(["vendor_ids": .object(["adid": .string("0123456789abcdef0123456789abcdef")])])
        let other = StoreConformanceTests.install("u2", at: clock.now)
        let otherApp = StoreConformanceTests.install("u1", at: clock.now, app: "2")
        // Another user on the same device, and a placeholder id on another user's device: never
        // the user's. Following ids from record to record would forget them too.
        var sharedDevice = StoreConformanceTests.install("u3", at: clock.now)
        sharedDevice.idfv = Self.idfv
        var placeholderHere = session
        placeholderHere.recordID = AttributionRecord.newRecordID()
        placeholderHere.dedupeKey = "s2s:session:anonymous-here"
        placeholderHere.appUserID = "anonymous"
        var placeholderElsewhere = placeholderHere
        placeholderElsewhere.recordID = AttributionRecord.newRecordID()
        placeholderElsewhere.dedupeKey = "s2s:session:anonymous-elsewhere"
        placeholderElsewhere.idfv = "11111111-2222-3333-4444-555555555555"
        let all = [install, purchase, session, other, otherApp, sharedDevice, placeholderHere, placeholderElsewhere]
        _ = try await store.ingest(all.map { RoutedRecord(record: $0, sinks: ["a"]) })

        let status = try await store.forget(
            ForgetSubject(appID: "1", appUserID: "u1"), requestID: "req-1", userDigest: "digest", sinks: ["a", "b"],
            now: clock.now)
        // The install, the purchase, and the device's records that name no real user.
        #expect(status.recordsForgotten == 4)
        #expect(status.sinks == [.init(sink: "a", state: .pending), .init(sink: "b", state: .pending)])
        #expect(status.userDigest == "digest")

        var kept: [AttributionRecord] = []
        for record in [install, purchase, session] {
            let stored = try #require(try await store.record(id: record.recordID))
            #expect(stored.raw == nil && stored.vendorIDs == nil)
            #expect(stored.appUserID.map { $0.hasPrefix("forgotten-") } ?? true)
            #expect(stored.idfv.map { $0.hasPrefix("forgotten-") } ?? true)
            #expect(!stored.dedupeKey.contains("u1") && !stored.dedupeKey.contains(Self.idfv))
            #expect(stored.kind == record.kind && stored.keyword == record.keyword && stored.revenue == record.revenue)
            kept.append(stored)
        }
        // One stand-in per id: the report still joins the user's install to their purchase.
        #expect(kept[0].appUserID == kept[1].appUserID)
        #expect(kept[0].idfv == kept[2].idfv)
        #expect(kept[1].transactionID?.hasPrefix("forgotten-") == true)
        #expect(try await store.record(id: other.recordID) == other)
        #expect(try await store.record(id: otherApp.recordID) == otherApp)
        #expect(try await store.record(id: sharedDevice.recordID) == sharedDevice)
        #expect(try await store.record(id: placeholderElsewhere.recordID) == placeholderElsewhere)
        #expect(try await store.record(id: placeholderHere.recordID)?.idfv?.hasPrefix("forgotten-") == true)
        // A copy posted again is a new record, not a duplicate of a forgotten one.
        #expect(try await store.existingRecordIDs(dedupeKeys: [install.dedupeKey, purchase.dedupeKey]).isEmpty)

        // Nothing of the user is sent any more; the request is.
        let due = try await store.dueEntries(sink: "a", now: clock.now, limit: 10)
        #expect(
            Set(due.map(\.record.recordID)) == [
                other.recordID, otherApp.recordID, sharedDevice.recordID, placeholderElsewhere.recordID, "req-1",
            ])
        #expect(due.first { $0.record.recordID == "req-1" }?.record.kind == .forget)
        let request = try #require(try await store.forgetRequest(id: "req-1", sink: "a"))
        #expect(request.appID == "1")
        #expect(request.identifiers.appUserIDs == ["u1"])
        #expect(request.identifiers.idfvs == [Self.idfv])
        #expect(
            request.identifiers.vendorIDs == ["appsflyer_id": ["af-1"], "adid": ["0123456789abcdef0123456789abcdef"]])
        #expect(
            Set(request.identifiers.recordIDs) == [
                install.recordID, purchase.recordID, session.recordID, placeholderHere.recordID,
            ])

        try await store.forgetAnswered(requestID: "req-1", sink: "a", answer: .done, now: clock.now)
        let halfway = try #require(try await store.forgetStatus(id: "req-1"))
        #expect(halfway.sinks == [.init(sink: "a", state: .done), .init(sink: "b", state: .pending)])
        #expect(halfway.completedAt == nil)
        #expect(try await store.forgetRequest(id: "req-1", sink: "b") != nil)

        try await store.forgetAnswered(
            requestID: "req-1", sink: "b", answer: .notSupported(reason: "keeps nothing"), now: clock.now)
        let done = try #require(try await store.forgetStatus(id: "req-1"))
        #expect(
            done.sinks == [
                .init(sink: "a", state: .done), .init(sink: "b", state: .notSupported, reason: "keeps nothing"),
            ])
        #expect(done.completedAt != nil)
        #expect(done.overall == .done)
        // The ids are gone with the request's record; the audit row stays.
        #expect(try await store.forgetRequest(id: "req-1", sink: "b") == nil)
        #expect(try await store.record(id: "req-1") == nil)
        #expect(try await store.dueEntries(sink: "b", now: clock.now, limit: 10).isEmpty)
    }

    /// `é` sent composed by the app and decomposed in the request (or the other way round)
    /// is one user, as the report counts them: the store compares bytes.
    /// A body changed by hand in the database leaves its raw payload unreadable: the
    /// forget still takes the user's ids out of the body, and the payload with them.
    @Test(arguments: StoreBackend.available.filter { $0 != .memory })
    func aRecordWhoseBodyWasChangedByHandIsForgottenToo(backend: StoreBackend) async throws {
        let made = try await backend.make(clock: TestClock())
        var install = StoreConformanceTests.install("u1", at: Date())
        install.raw = .object(["app_user_id": .string("u1"), "campaign": .string("Spring")])
        _ = try await made.store.ingest([RoutedRecord(record: install, sinks: ["a"])])
        try await made.execute(
            "UPDATE records SET body = body || ' ' WHERE app_id = '1'")
        await #expect(throws: (any Error).self) { _ = try await made.store.record(id: install.recordID) }

        let status = try await made.store.forget(
            ForgetSubject(appID: "1", appUserID: "u1"), requestID: "req-1", userDigest: "digest", sinks: ["a"],
            now: Date())
        #expect(status.recordsForgotten == 1)
        let stored = try #require(try await made.store.record(id: install.recordID))
        #expect(stored.raw == nil && stored.appUserID?.hasPrefix("forgotten-") == true)
    }

    @Test(arguments: StoreBackend.available)
    func aUserIdSpelledInAnotherUnicodeFormIsTheSameUser(backend: StoreBackend) async throws {
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        let decomposed = "jose\u{301}-user"
        let composed = "jos\u{E9}-user"
        let install = StoreConformanceTests.install(decomposed, at: clock.now)
        let other = StoreConformanceTests.install("jose-user", at: clock.now)
        _ = try await store.ingest([install, other].map { RoutedRecord(record: $0, sinks: ["a"]) })
        let status = try await store.forget(
            ForgetSubject(appID: "1", appUserID: composed), requestID: "req-nfc", userDigest: "d", sinks: ["a"],
            now: clock.now)
        #expect(status.recordsForgotten == 1)
        #expect(try await store.record(id: install.recordID)?.appUserID?.hasPrefix("forgotten-") == true)
        #expect(try await store.record(id: other.recordID) == other)
        // The sinks hear both spellings: their tables compare bytes too.
        let request = try #require(try await store.forgetRequest(id: "req-nfc", sink: "a"))
        #expect(
            Set(request.identifiers.appUserIDs.map { Array($0.utf8) }) == [
                Array(composed.utf8), Array(decomposed.utf8),
            ])
    }

    /// A token of the user's still waiting for Apple would become a record naming them.
    @Test(arguments: StoreBackend.available)
    func theUsersTokensStillWaitingAreDropped(backend: StoreBackend) async throws {
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        func work(_ user: String, idfv: String? = nil, app: String = "1") -> PendingWork {
            var state: [String: JSONValue] = [
                "token": .string("t-\(user)"), "appID": .string(app),
                "appUserID": .string(user),
            ]
            state["idfv"] = idfv.map(JSONValue.string)
            return PendingWork(
                provider: "adservices", dedupeKey: "adservices:\(app):\(user)", appID: app, receivedAt: clock.now,
                state: Data(JSONValue.object(state).compactUTF8))
        }
        let mine = work("u1")
        // A token that names no user, on the user's device (the install names it): theirs.
        let sameDevice = work("", idfv: Self.idfv)
        // Another user's token on the same device: not theirs.
        let anotherUser = work("u4", idfv: Self.idfv)
        let theirs = work("u2")
        let otherApp = work("u1", app: "2")
        var install = StoreConformanceTests.install("u1", at: clock.now)
        install.idfv = Self.idfv
        _ = try await store.ingest([RoutedRecord(record: install, sinks: [])])
        for pending in [mine, sameDevice, anotherUser, theirs, otherApp] {
            _ = try await store.addPending(pending, now: clock.now)
        }

        let status = try await store.forget(
            ForgetSubject(appID: "1", appUserID: "u1"), requestID: "req-3", userDigest: "d", sinks: [],
            now: clock.now)
        // No sink to ask: done with the store's part, with nothing of the user kept for one.
        #expect(status.overall == .done)
        #expect(try await store.forgetRequest(id: "req-3", sink: "any") == nil)
        #expect(try await store.record(id: "req-3") == nil)
        #expect(try await store.isPending(recordID: mine.recordID) == false)
        #expect(try await store.isPending(recordID: sameDevice.recordID) == false)
        #expect(try await store.isPending(recordID: theirs.recordID))
        #expect(try await store.isPending(recordID: anotherUser.recordID))
        // Apple's answer, come while the request was made, stores nothing of the user.
        var answered = StoreConformanceTests.install("u1", at: clock.now)
        answered.recordID = mine.recordID
        answered.dedupeKey = mine.dedupeKey
        let results = try await store.settlePending([
            .finished(recordID: mine.recordID, records: [RoutedRecord(record: answered, sinks: ["a"])])
        ])
        #expect(results[mine.recordID] ?? [] == [])
        #expect(try await store.record(id: mine.recordID) == nil)
        #expect(try await store.dueEntries(sink: "a", now: clock.now, limit: 10).isEmpty)
        #expect(try await store.isPending(recordID: otherApp.recordID))
    }

    @Test(arguments: StoreBackend.available)
    func aDeletionASinkGaveUpOnShowsAsFailedWithItsReason(backend: StoreBackend) async throws {
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        _ = try await store.forget(
            ForgetSubject(appID: "1", idfv: Self.idfv), requestID: "req-2", userDigest: "d", sinks: ["hook"],
            now: clock.now)
        let entry = try #require(try await store.dueEntries(sink: "hook", now: clock.now, limit: 10).first)
        try await store.resolve(
            sink: "hook",
            [.retry(id: entry.id, attempts: 1, at: clock.now.addingTimeInterval(60), error: "webhook answered 503")],
            now: clock.now)
        #expect(
            try await store.forgetStatus(id: "req-2")?.sinks == [
                .init(sink: "hook", state: .pending, reason: "webhook answered 503")
            ])
        try await store.resolve(
            sink: "hook", [.deadLetter(id: entry.id, attempts: 2, error: "webhook answered 410")], now: clock.now)
        let status = try #require(try await store.forgetStatus(id: "req-2"))
        #expect(status.sinks == [.init(sink: "hook", state: .failed, reason: "webhook answered 410")])
        #expect(status.overall == .failed)
        #expect(status.recordsForgotten == 0)
        // The store held nothing of the device: the sink still gets the id named, to delete
        // what its own table may hold.
        #expect(try await store.forgetRequest(id: "req-2", sink: "hook")?.identifiers.idfvs == [Self.idfv])
        #expect(try await store.forgetStatus(id: "no-such-request") == nil)
    }
}

extension ForgetConformanceTests {
    /// A destination that takes a deletion and works on it for a while: its note comes back
    /// at the next attempt, the request stays queued, and nothing else waits for it.
    @Test(arguments: StoreBackend.available)
    func aDeletionInProgressKeepsItsNoteAndHoldsNothingElseUp(backend: StoreBackend) async throws {
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        let sink = PollingSink()
        let worker = SinkWorker(
            sinkName: "slow", sink: ForgettingSink(sink, sinkName: "slow", store: store, now: { clock.now }),
            store: store, settings: DeliverySettings(), now: { clock.now })
        _ = try await store.forget(
            ForgetSubject(appID: "1", appUserID: "u1"), requestID: "req-4", userDigest: "d", sinks: ["slow"],
            now: clock.now)
        #expect(try await worker.drainOnce() == 1)
        #expect(sink.progressSeen.withLock { $0 } == [nil])
        let status = try #require(try await store.forgetStatus(id: "req-4"))
        #expect(status.sinks == [.init(sink: "slow", state: .pending, reason: "task-7")])
        #expect(try await store.forgetRequest(id: "req-4", sink: "slow")?.progress == "task-7")
        // Not due again for an hour, no attempt counted; a record queued meanwhile goes at once.
        let record = StoreConformanceTests.install("u2", at: clock.now)
        _ = try await store.ingest([RoutedRecord(record: record, sinks: ["slow"])])
        #expect(try await worker.drainOnce() == 1)
        #expect(sink.delivered.withLock { $0 } == [record.recordID])
        let next = try #require(try await store.nextDueDate(sink: "slow"))
        #expect(next.timeIntervalSince(clock.now) > 3590)
        clock.advance(3601)
        #expect(try await worker.drainOnce() == 1)
        #expect(sink.progressSeen.withLock { $0 } == [nil, "task-7"])
        #expect(try await store.forgetStatus(id: "req-4")?.overall == .done)
    }
}

/// A sink whose destination takes a deletion at the first ask and reports it done at the next.
final class PollingSink: AttributionSink {
    let maxBatchSize = 10
    let progressSeen = Mutex<[String?]>([])
    let delivered = Mutex<[String]>([])

    func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
        delivered.withLock { $0 += records.map(\.recordID) }
        return records.map { _ in .delivered }
    }

    func forget(_ request: ForgetRequest) async throws -> ForgetOutcome {
        progressSeen.withLock { $0.append(request.progress) }
        return request.progress == nil ? .inProgress(note: "task-7", checkAfter: .seconds(3600)) : .done
    }
}

extension ForgetConformanceTests {
    /// An ASA SDK user attributed to one of the user's records goes, with the App Store
    /// transactions they claimed; another SDK user stays.
    @Test(arguments: StoreBackend.available)
    func theUsersSDKUserAndTheirTransactionsGo(backend: StoreBackend) async throws {
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        var install = StoreConformanceTests.install("u1", at: clock.now)
        install.idfv = Self.idfv
        let other = StoreConformanceTests.install("u2", at: clock.now)
        _ = try await store.ingest([install, other].map { RoutedRecord(record: $0, sinks: []) })
        let mine = try await store.createSDKUser(now: clock.now)
        let theirs = try await store.createSDKUser(now: clock.now)
        try await store.setSDKUserAttribution(userID: mine.id, recordID: install.recordID)
        try await store.setSDKUserAttribution(userID: theirs.id, recordID: other.recordID)
        _ = try await store.associateTransaction(userID: mine.id, transactionID: "T-mine", now: clock.now)
        _ = try await store.associateTransaction(userID: theirs.id, transactionID: "T-theirs", now: clock.now)
        // One whose token still waits for Apple: attributed to the record it will become.
        let waiting = PendingWork(
            provider: "adservices", dedupeKey: "adservices:1:waiting", appID: "1", receivedAt: clock.now,
            state: Data(#"{"token":"t","appID":"1","appUserID":"u1"}"#.utf8))
        _ = try await store.addPending(waiting, now: clock.now)
        let waitingUser = try await store.createSDKUser(now: clock.now)
        try await store.setSDKUserAttribution(userID: waitingUser.id, recordID: waiting.recordID)
        _ = try await store.associateTransaction(userID: waitingUser.id, transactionID: "T-waiting", now: clock.now)

        _ = try await store.forget(
            ForgetSubject(appID: "1", appUserID: "u1"), requestID: "req-5", userDigest: "d", sinks: [], now: clock.now)
        #expect(try await store.sdkUser(id: mine.id) == nil)
        #expect(try await store.sdkUser(id: waitingUser.id) == nil)
        #expect(try await store.sdkUser(id: theirs.id)?.attributionRecordID == other.recordID)
        // The transaction is free again: a new user may claim it, as after a reinstall.
        let newcomer = try await store.createSDKUser(now: clock.now)
        #expect(
            try await store.associateTransaction(userID: newcomer.id, transactionID: "T-mine", now: clock.now)
                == .associated)
        #expect(
            try await store.associateTransaction(userID: newcomer.id, transactionID: "T-theirs", now: clock.now)
                != .associated)
    }
}

extension ForgetConformanceTests {
    /// A destination's answer may quote what it was sent: the user's ids are taken out of
    /// what the status, the dead letters and the log keep.
    @Test func aDestinationsAnswerQuotingTheUserKeepsNoIdOfTheirs() async throws {
        let clock = TestClock()
        let store = InMemoryStore(now: { clock.now })
        var install = StoreConformanceTests.install("quoted-user-88", at: clock.now)
        install.idfv = Self.idfv
        _ = try await store.ingest([RoutedRecord(record: install, sinks: [])])
        let worker = SinkWorker(
            sinkName: "echo", sink: ForgettingSink(EchoingSink(), sinkName: "echo", store: store, now: { clock.now }),
            store: store, settings: DeliverySettings(), now: { clock.now })
        _ = try await store.forget(
            ForgetSubject(appID: "1", appUserID: "quoted-user-88"), requestID: "req-6", userDigest: "d",
            sinks: ["echo"], now: clock.now)
        #expect(try await worker.drainOnce() == 1)
        let status = try #require(try await store.forgetStatus(id: "req-6"))
        let reason = try #require(status.sinks.first?.reason)
        #expect(reason.contains("is not allowed"))
        #expect(!reason.contains("quoted-user-88") && !reason.lowercased().contains(Self.idfv.lowercased()))
    }
}

/// A destination that refuses a deletion, quoting the ids it was sent.
final class EchoingSink: AttributionSink {
    let maxBatchSize = 10

    func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
        records.map { _ in .delivered }
    }

    func forget(_ request: ForgetRequest) async throws -> ForgetOutcome {
        let quoted = (request.identifiers.appUserIDs + request.identifiers.idfvs).joined(separator: ", ")
        return .failed(reason: "$distinct_id \(quoted) is not allowed")
    }
}

extension ForgetConformanceTests {
    /// A late version (an enricher's name, an SDK purchase credited) made from the record
    /// before a forget reduced it must not bring the user's ids back.
    @Test(arguments: StoreBackend.available)
    func aLateVersionMadeBeforeTheForgetDoesNotBringTheUserBack(backend: StoreBackend) async throws {
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        let install = StoreConformanceTests.install("late-u1", at: clock.now)
        _ = try await store.ingest([RoutedRecord(record: install, sinks: [])])
        var late = install
        late.keyword = "meditation app, named"
        _ = try await store.forget(
            ForgetSubject(appID: "1", appUserID: "late-u1"), requestID: "req-7", userDigest: "d", sinks: [],
            now: clock.now)
        #expect(try await store.replaceRecords([RoutedRecord(record: late, sinks: ["a"])], now: clock.now) == 0)
        #expect(try await store.record(id: install.recordID)?.appUserID?.hasPrefix("forgotten-") == true)
        #expect(try await store.dueEntries(sink: "a", now: clock.now, limit: 10).isEmpty)
    }
}
