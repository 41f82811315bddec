import Foundation
import GatewayCore
import Testing

/// The contract of each store role, held by every backend alike: what providers, the
/// delivery worker and the commands rely on whichever database runs underneath.
@Suite struct StoreConformanceTests {
    static func install(_ user: String, key: String? = nil, at date: Date, app: String = "1") -> AttributionRecord {
        var record = AttributionRecord(
            provider: "iad", kind: .install, dedupeKey: key ?? "iad:\(app):\(user)", receivedAt: date, attributed: true)
        record.appID = app
        record.appUserID = user
        record.keyword = "meditation"
        return record
    }

    @Test(arguments: StoreBackend.available)
    func aRecordAndItsOutboxRowsAreStoredTogether(backend: StoreBackend) async throws {
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        let record = Self.install("u1", at: clock.now)
        let results = try await store.ingest([RoutedRecord(record: record, sinks: ["a", "b"])])
        #expect(results == [.stored(recordID: record.recordID)])
        #expect(try await store.record(id: record.recordID) == record)
        let stats = try await store.outboxStats()
        #expect(stats["a"] == OutboxStats(depth: 1, oldest: clock.now))
        #expect(stats["b"] == OutboxStats(depth: 1, oldest: clock.now))
        let due = try await store.dueEntries(sink: "a", now: clock.now, limit: 10)
        #expect(due.map(\.record) == [record])
        #expect(due.first?.attempts == 0)
    }

    @Test(arguments: StoreBackend.available)
    func aDedupeKeyIsStoredOnceAndItsCopiesNameTheFirst(backend: StoreBackend) async throws {
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        let first = Self.install("u1", at: clock.now)
        let copy = Self.install("u1", at: clock.now)
        _ = try await store.ingest([RoutedRecord(record: first, sinks: ["a"])])
        // Again alone, and twice inside one batch beside a new record.
        let other = Self.install("u2", at: clock.now)
        #expect(try await store.ingest([RoutedRecord(record: copy, sinks: ["a"])]) == [.duplicate(of: first.recordID)])
        let batch = try await store.ingest([
            RoutedRecord(record: other, sinks: ["a"]),
            RoutedRecord(record: Self.install("u2", at: clock.now), sinks: ["a"]),
        ])
        #expect(batch == [.stored(recordID: other.recordID), .duplicate(of: other.recordID)])
        #expect(try await store.outboxStats()["a"]?.depth == 2)
        #expect(
            try await store.existingRecordIDs(dedupeKeys: [first.dedupeKey, "iad:1:nobody"]) == [
                .init(first.dedupeKey): first.recordID
            ])
    }

    /// Dedupe keys are compared by their bytes everywhere, as the databases compare them:
    /// `café` spelt with one scalar or with `e` and a combining accent, and the Kelvin sign
    /// and `K`, are two keys each, in the store and in the pipeline's early lookup (which
    /// runs with an enricher) alike, which as Swift strings took them for one.
    @Test(arguments: StoreBackend.available)
    func dedupeKeysAreComparedByTheirBytes(backend: StoreBackend) async throws {
        struct Untouched: Enricher {
            var name: String { "untouched" }
            func enrich(_ records: [AttributionRecord]) async -> [AttributionRecord] { records }
        }
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        let pipeline = IngestPipeline(
            store: store, router: RecordRouter(routes: [Route(sinks: ["a"])]), enrichers: [Untouched()])
        let pairs = [("caf\u{E9}", "cafe\u{301}"), ("K", "\u{212A}")]
        for (stored, lookalike) in pairs {
            #expect(stored == lookalike && Array(stored.utf8) != Array(lookalike.utf8))
            let first = Self.install(stored, key: "iad:1:\(stored)", at: clock.now)
            _ = try await pipeline.ingest([first])
            let outcomes = try await pipeline.ingest([
                Self.install(stored, key: "iad:1:\(stored)", at: clock.now),
                Self.install(lookalike, key: "iad:1:\(lookalike)", at: clock.now),
            ])
            #expect(outcomes.map(\.duplicateOf) == [first.recordID, nil], "\(stored)")
            let found = try await store.existingRecordIDs(dedupeKeys: ["iad:1:\(stored)", "iad:1:\(lookalike)"])
            #expect(
                found == [.init("iad:1:\(stored)"): first.recordID, .init("iad:1:\(lookalike)"): outcomes[1].recordID])
        }
        #expect(try await store.countRecords(matching: .init()) == 4)
    }

    /// Two connections (two replicas, or two stores on one file) racing with copies of one
    /// payload: one copy is stored, every other answer names it.
    @Test(arguments: StoreBackend.available)
    func copiesRacingOnTwoConnectionsStoreOneRecord(backend: StoreBackend) async throws {
        let clock = TestClock()
        let made = try await backend.make(clock: clock)
        let stores = [made.store, try await made.open()]
        for round in 0..<10 {
            let results = try await withThrowingTaskGroup(of: IngestResult.self) { group in
                for index in 0..<8 {
                    let store = stores[index % 2]
                    group.addTask {
                        let record = Self.install("racer-\(round)", at: clock.now)
                        return try await store.ingest([RoutedRecord(record: record, sinks: ["a"])])[0]
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let stored = results.compactMap { if case .stored(let id) = $0 { id } else { nil } }
            #expect(stored.count == 1)
            #expect(results.allSatisfy { $0 == .stored(recordID: stored[0]) || $0 == .duplicate(of: stored[0]) })
        }
        #expect(try await made.store.outboxStats()["a"]?.depth == 10)
    }

    @Test(arguments: StoreBackend.available)
    func deliveredRowsGoRetriedRowsWaitAndDeadLettersCanBeRetriedOrDropped(backend: StoreBackend) async throws {
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        let records = (0..<3).map { Self.install("u\($0)", at: clock.now) }
        _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: ["a"]) })
        let due = try await store.dueEntries(sink: "a", now: clock.now, limit: 10)
        #expect(due.map(\.record.recordID) == records.map(\.recordID))
        try await store.resolve(
            sink: "a",
            [
                .delivered(id: due[0].id),
                .retry(id: due[1].id, attempts: 1, at: clock.now.addingTimeInterval(10), error: "503"),
                .deadLetter(id: due[2].id, attempts: 5, error: "400 bad payload"),
            ], now: clock.now)
        #expect(try await store.outboxStats()["a"]?.depth == 1)
        #expect(try await store.dueEntries(sink: "a", now: clock.now.addingTimeInterval(5), limit: 10).isEmpty)
        #expect(try await store.nextDueDate(sink: "a") == clock.now.addingTimeInterval(10))
        let retried = try await store.dueEntries(sink: "a", now: clock.now.addingTimeInterval(11), limit: 10)
        #expect(retried.map(\.record.recordID) == [records[1].recordID])
        #expect(retried.first?.attempts == 1)

        let letters = try await store.deadLetters(sink: "a", limit: 10)
        #expect(letters.map(\.recordID) == [records[2].recordID])
        #expect(letters.first?.error == "400 bad payload")
        #expect(letters.first?.attempts == 5)
        #expect(try await store.deadLetterCounts(ids: nil) == ["a": 1])
        #expect(try await store.retryDeadLetters(ids: nil, sink: "other", now: clock.now) == 0)
        #expect(try await store.retryDeadLetters(ids: [letters[0].id], sink: nil, now: clock.now) == 1)
        #expect(try await store.deadLetters(sink: nil, limit: 10).isEmpty)
        let back = try await store.dueEntries(sink: "a", now: clock.now, limit: 10)
        #expect(back.map(\.record.recordID) == [records[2].recordID])
        #expect(back.first?.attempts == 0)

        try await store.resolve(sink: "a", [.deadLetter(id: back[0].id, attempts: 1, error: "gone")], now: clock.now)
        #expect(try await store.dropDeadLetters(ids: nil, sink: "a") == 1)
        #expect(try await store.deadLetters(sink: nil, limit: 10).isEmpty)
    }

    /// Past the cap, a provider's oldest quarantined records go first; one a sink has yet to
    /// take (in its outbox, or a dead letter) stays whatever the cap says, and nothing else
    /// in the store is touched.
    @Test(arguments: StoreBackend.available)
    func theOldestQuarantinedRecordsAreDroppedPastTheCapButNoneASinkWaitsFor(backend: StoreBackend) async throws {
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        func postback(_ index: Int, _ signature: String) -> AttributionRecord {
            var record = AttributionRecord(
                provider: "skadnetwork", kind: .postback, dedupeKey: "skan:tx-\(index):0:\(signature)",
                receivedAt: clock.now, attributed: true)
            record.signature = signature
            record.transactionID = "tx-\(index)"
            return record
        }
        func bytes(_ records: [AttributionRecord]) -> Int { records.reduce(0) { $0 + $1.encoded().json.count } }
        let verified = postback(0, "verified")
        let quarantined = (1...6).map { postback($0, $0 == 3 ? "unverifiable" : "invalid") }
        let install = Self.install("u1", at: clock.now)
        // The two oldest go to an audit sink: one waits in its outbox, one becomes a dead letter.
        _ = try await store.ingest(
            [RoutedRecord(record: verified, sinks: []), RoutedRecord(record: install, sinks: [])]
                + quarantined.enumerated().map { RoutedRecord(record: $1, sinks: $0 < 2 ? ["audit"] : []) })
        let due = try await store.dueEntries(sink: "audit", now: clock.now, limit: 10)
        try await store.resolve(sink: "audit", [.deadLetter(id: due[1].id, attempts: 1, error: "400")], now: clock.now)

        let kept = [quarantined[0], quarantined[1], quarantined[4], quarantined[5]]
        #expect(
            try await store.trimQuarantined(provider: "skadnetwork", maxBytes: bytes(kept))
                == QuarantineTrim(dropped: 2, keptBytes: bytes(kept)))
        for record in [verified, install] + kept {
            #expect(try await store.record(id: record.recordID) == record)
        }
        for record in quarantined[2...3] {
            #expect(try await store.record(id: record.recordID) == nil)
        }
        #expect(try await store.countRecords(matching: .init()) == 6)
        // Within the cap, and another provider's cap, drop nothing.
        #expect(
            try await store.trimQuarantined(provider: "skadnetwork", maxBytes: bytes(kept))
                == QuarantineTrim(dropped: 0, keptBytes: bytes(kept)))
        #expect(
            try await store.trimQuarantined(provider: "iad", maxBytes: 0) == QuarantineTrim(dropped: 0, keptBytes: 0))
        // A dropped record's key went with it: a copy posted later is stored again.
        let again = postback(3, "unverifiable")
        #expect(
            try await store.ingest([RoutedRecord(record: again, sinks: [])]) == [.stored(recordID: again.recordID)])
        // However small the cap, what a sink still waits for stays.
        #expect(
            try await store.trimQuarantined(provider: "skadnetwork", maxBytes: 0)
                == QuarantineTrim(dropped: 3, keptBytes: bytes(Array(quarantined[0...1]))))
        #expect(try await store.record(id: quarantined[0].recordID) == quarantined[0])
        #expect(try await store.outboxStats()["audit"]?.depth == 1)
        #expect(try await store.deadLetters(sink: "audit", limit: 10).map(\.recordID) == [quarantined[1].recordID])
        #expect(try await store.record(id: verified.recordID) == verified)
    }

    /// A device's records go out in the order they were stored, whatever their retries.
    @Test(arguments: StoreBackend.available)
    func inDeviceOrderALaterRecordWaitsForItsDevicesFirst(backend: StoreBackend) async throws {
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        var first = Self.install("same", key: "e1", at: clock.now)
        first.idfv = "AAAA"
        var second = Self.install("same", key: "e2", at: clock.now)
        second.idfv = "AAAA"
        let stranger = Self.install("other", at: clock.now)
        _ = try await store.ingest([first, second, stranger].map { RoutedRecord(record: $0, sinks: ["v"]) })
        let heads = try await store.dueEntries(sink: "v", now: clock.now, limit: 10, laneOrdered: true)
        #expect(heads.map(\.record.recordID) == [first.recordID, stranger.recordID])
        let later = clock.now.addingTimeInterval(60)
        try await store.resolve(
            sink: "v", [.retry(id: heads[0].id, attempts: 1, at: later, error: "429"), .delivered(id: heads[1].id)],
            now: clock.now)
        try await store.holdLanes(sink: "v", behind: [(heads[0].id, later)])
        #expect(
            try await store.dueEntries(sink: "v", now: clock.now.addingTimeInterval(30), limit: 10, laneOrdered: true)
                .isEmpty)
        #expect(try await store.nextDueDate(sink: "v", laneOrdered: true) == later)
        let again = try await store.dueEntries(sink: "v", now: later, limit: 10, laneOrdered: true)
        #expect(again.map(\.record.recordID) == [first.recordID])
        try await store.resolve(sink: "v", [.delivered(id: again[0].id)], now: later)
        let next = try await store.dueEntries(sink: "v", now: later, limit: 10, laneOrdered: true)
        #expect(next.map(\.record.recordID) == [second.recordID])
    }

    @Test(arguments: StoreBackend.available)
    func aRowMarkedSendingSaysSoWhenOfferedAgain(backend: StoreBackend) async throws {
        let clock = TestClock()
        let made = try await backend.make(clock: clock)
        let record = Self.install("u1", at: clock.now)
        _ = try await made.store.ingest([RoutedRecord(record: record, sinks: ["vendor"])])
        let due = try await made.store.dueEntries(sink: "vendor", now: clock.now, limit: 1)
        #expect(due.first?.wasBeingSent == false)
        try await made.store.markSending(id: due[0].id, now: clock.now)
        // The process stops before the answer is written; the next one finds the mark.
        let reopened = try await made.open()
        let later = clock.now.addingTimeInterval(3600)
        #expect(try await reopened.dueEntries(sink: "vendor", now: later, limit: 1).first?.wasBeingSent == true)
    }

    @Test(arguments: StoreBackend.available)
    func replayReadsInStorageOrderAndQueuesEachRecordOnce(backend: StoreBackend) async throws {
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        let records = (0..<5).map { index in
            var record = Self.install("u\(index)", at: clock.now.addingTimeInterval(Double(index)))
            if index == 4 { record.provider = "adservices" }
            return record
        }
        _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: []) })
        var seen: [String] = []
        var cursor: Int64 = 0
        while true {
            let page = try await store.readableRecords(matching: ReplayFilter(provider: "iad"), after: cursor, limit: 2)
            if page.records.isEmpty { break }
            seen += page.records.map(\.recordID)
            #expect(page.records.allSatisfy { $0.record != nil })
            cursor = page.cursor
        }
        #expect(seen == records.prefix(4).map(\.recordID))
        let since = ReplayFilter(since: clock.now.addingTimeInterval(2))
        #expect(try await store.countRecords(matching: since) == 3)
        #expect(try await store.countRecords(matching: ReplayFilter()) == 5)
        #expect(try await store.enqueue(recordIDs: seen + ["no-such-record"], sink: "late", now: clock.now) == 4)
        #expect(try await store.enqueue(recordIDs: seen, sink: "late", now: clock.now) == 0)
        #expect(try await store.outboxStats()["late"]?.depth == 4)
    }

    @Test(arguments: StoreBackend.available)
    func aLateVersionReplacesTheRecordAndIsQueuedAgain(backend: StoreBackend) async throws {
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        let record = Self.install("u1", at: clock.now)
        _ = try await store.ingest([RoutedRecord(record: record, sinks: ["a"])])
        let old = try await store.dueEntries(sink: "a", now: clock.now, limit: 1)
        var named = record
        named.campaignName = "Late name"
        let replaced = try await store.replaceRecords(
            [
                RoutedRecord(record: named, sinks: ["a"]),
                RoutedRecord(record: Self.install("nobody", at: clock.now), sinks: ["a"]),
            ],
            now: clock.now)
        #expect(replaced == 1)
        #expect(try await store.record(id: record.recordID)?.campaignName == "Late name")
        // The worker that had the old version resolves the old row; the new one still goes.
        try await store.resolve(sink: "a", [.delivered(id: old[0].id)], now: clock.now)
        let due = try await store.dueEntries(sink: "a", now: clock.now, limit: 10)
        #expect(due.map(\.record.campaignName) == ["Late name"])
    }

    @Test(arguments: StoreBackend.available)
    func pendingWorkIsAdmittedOnceClaimedUnderALeaseAndSettledIntoRecords(backend: StoreBackend) async throws {
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        let work = PendingWork(
            provider: "adservices", dedupeKey: "adservices:token:t1", appID: "1", receivedAt: clock.now,
            state: Data("state".utf8))
        #expect(try await store.addPending(work, now: clock.now) == .accepted(recordID: work.recordID))
        let copy = PendingWork(
            provider: "adservices", dedupeKey: work.dedupeKey, appID: "1", receivedAt: clock.now, state: Data())
        #expect(try await store.addPending(copy, now: clock.now) == .duplicate(of: work.recordID, resolved: false))
        // Another app's payload with the same key is its own work.
        let otherApp = PendingWork(
            provider: "adservices", dedupeKey: work.dedupeKey, appID: "2", receivedAt: clock.now, state: Data())
        #expect(try await store.addPending(otherApp, now: clock.now) == .accepted(recordID: otherApp.recordID))
        #expect(try await store.pendingCounts() == ["adservices": 2])
        #expect(try await store.waitingWork(after: nil, limit: 10).count == 2)

        let claimed = try await store.claimPending(
            provider: "adservices", now: clock.now, lease: .seconds(30), limit: 1)
        #expect(claimed.map(\.recordID) == [work.recordID])
        #expect(claimed.first?.state == Data("state".utf8))
        let second = try await store.claimPending(
            provider: "adservices", now: clock.now, lease: .seconds(30), limit: 10)
        #expect(second.map(\.recordID) == [otherApp.recordID])
        #expect(
            try await store.claimPending(provider: "adservices", now: clock.now, lease: .seconds(30), limit: 10).isEmpty
        )
        // A claim whose holder died comes back when its lease ends.
        let expired = try await store.claimPending(
            provider: "adservices", now: clock.now.addingTimeInterval(31), lease: .seconds(30), limit: 10)
        #expect(Set(expired.map(\.recordID)) == [work.recordID, otherApp.recordID])

        var answered = Self.install("u1", at: clock.now)
        answered.provider = "adservices"
        answered.recordID = work.recordID
        answered.dedupeKey = work.dedupeKey
        let results = try await store.settlePending([
            .finished(recordID: work.recordID, records: [RoutedRecord(record: answered, sinks: ["a"])]),
            .retry(
                recordID: otherApp.recordID, state: Data("next".utf8), attempts: 1,
                at: clock.now.addingTimeInterval(300),
                error: "Apple answered 500"),
        ])
        #expect(results[work.recordID] == [.stored(recordID: work.recordID)])
        #expect(try await store.isPending(recordID: work.recordID) == false)
        #expect(try await store.isPending(recordID: otherApp.recordID))
        #expect(try await store.record(id: work.recordID)?.provider == "adservices")
        #expect(try await store.outboxStats()["a"]?.depth == 1)
        #expect(try await store.nextPendingDate(provider: "adservices") == clock.now.addingTimeInterval(300))
        #expect(try await store.addPending(copy, now: clock.now) == .duplicate(of: work.recordID, resolved: true))
    }

    @Test(arguments: StoreBackend.available)
    func sdkUsersGetUnguessableIdsAndATransactionBelongsToOneUser(backend: StoreBackend) async throws {
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        let alice = try await store.createSDKUser(now: clock.now)
        let bob = try await store.createSDKUser(now: clock.now)
        #expect(alice.id != bob.id)
        #expect(alice.id > 0 && alice.id < 1 << 53)
        #expect(
            try await store.associateTransaction(userID: alice.id, transactionID: "tx1", now: clock.now) == .associated)
        #expect(
            try await store.associateTransaction(userID: alice.id, transactionID: "tx1", now: clock.now)
                == .alreadyAssociated)
        #expect(
            try await store.associateTransaction(userID: bob.id, transactionID: "tx1", now: clock.now)
                == .belongsTo(userID: alice.id))

        var purchase = Self.install("alice", key: "sdk:purchase:tx1", at: clock.now)
        purchase.kind = .purchase
        purchase.resolution = .pending
        _ = try await store.ingest([RoutedRecord(record: purchase, sinks: [])])
        #expect(
            try await store.sdkPendingPurchaseIDs(userID: alice.id, keyPrefix: "sdk:purchase:") == [purchase.recordID])
        #expect(try await store.sdkPendingPurchaseIDs(userID: bob.id, keyPrefix: "sdk:purchase:").isEmpty)

        let install = Self.install("alice", at: clock.now)
        _ = try await store.ingest([RoutedRecord(record: install, sinks: [])])
        try await store.setSDKUserAttribution(userID: alice.id, recordID: install.recordID)
        #expect(try await store.sdkUser(id: alice.id)?.attributionRecordID == install.recordID)
        #expect(
            try await store.sdkAnsweredUsersWithPendingPurchases(keyPrefix: "sdk:purchase:") == [install.recordID])
        #expect(try await store.sdkUser(id: 12345) == nil)
    }
}

/// What only a store that several processes share must do: hand each due row to one of
/// them, and give a dead one's rows to the others when its lease ends.
@Suite struct SharedStoreTests {
    @Test(arguments: StoreBackend.shared)
    func twoReplicasClaimingAtOnceGetDisjointBatches(backend: StoreBackend) async throws {
        let clock = TestClock()
        let made = try await backend.make(clock: clock)
        let replicas = [made.store, try await made.open()]
        let records = (0..<200).map { StoreConformanceTests.install("u\($0)", at: clock.now) }
        _ = try await made.store.ingest(records.map { RoutedRecord(record: $0, sinks: ["hook"]) })
        let claimed = try await withThrowingTaskGroup(of: [String].self) { group in
            for replica in replicas {
                group.addTask {
                    var mine: [String] = []
                    while true {
                        let batch = try await replica.dueEntries(sink: "hook", now: clock.now, limit: 7)
                        if batch.isEmpty { return mine }
                        mine += batch.map(\.record.recordID)
                        try await replica.resolve(sink: "hook", batch.map { .delivered(id: $0.id) }, now: clock.now)
                    }
                }
            }
            return try await group.reduce(into: [[String]]()) { $0.append($1) }
        }
        let all = claimed.flatMap { $0 }
        #expect(all.count == records.count)
        #expect(Set(all) == Set(records.map(\.recordID)))
        #expect(try await made.store.outboxStats()["hook"] == nil)
    }

    @Test(arguments: StoreBackend.shared)
    func aBatchLeftUnresolvedIsOfferedAgainWhenItsLeaseEnds(backend: StoreBackend) async throws {
        let clock = TestClock()
        let made = try await backend.make(clock: clock)
        let record = StoreConformanceTests.install("u1", at: clock.now)
        _ = try await made.store.ingest([RoutedRecord(record: record, sinks: ["hook"])])
        let claimed = try await made.store.dueEntries(sink: "hook", now: clock.now, limit: 10)
        #expect(claimed.count == 1)
        // The replica that claimed it dies; the other finds nothing until the lease ends.
        let other = try await made.open()
        #expect(try await other.dueEntries(sink: "hook", now: clock.now.addingTimeInterval(59), limit: 10).isEmpty)
        let taken = try await other.dueEntries(sink: "hook", now: clock.now.addingTimeInterval(61), limit: 10)
        #expect(taken.map(\.record.recordID) == [record.recordID])
    }

    /// A replica that stops gives back the batch it cut short: the others take it at once,
    /// in its place among the due rows, but never a row resolved or claimed anew since.
    @Test(arguments: StoreBackend.shared)
    func aBatchGivenBackIsDueAtOnceUnlessResolvedOrClaimedAgainSince(backend: StoreBackend) async throws {
        let clock = TestClock()
        let made = try await backend.make(clock: clock)
        let other = try await made.open()
        let records = (0..<4).map { StoreConformanceTests.install("u\($0)", at: clock.now) }
        for record in records {
            _ = try await made.store.ingest([RoutedRecord(record: record, sinks: ["hook"])])
            clock.advance(1)
        }
        let claimed = try await made.store.dueEntries(sink: "hook", now: clock.now, limit: 3)
        #expect(claimed.map(\.record.recordID) == records.prefix(3).map(\.recordID))
        try await made.store.resolve(
            sink: "hook", [.retry(id: claimed[1].id, attempts: 1, at: clock.now.addingTimeInterval(30), error: "503")],
            now: clock.now)
        try await made.store.unclaim(sink: "hook", claimed)
        let again = try await other.dueEntries(sink: "hook", now: clock.now, limit: 10)
        #expect(again.map(\.record.recordID) == [records[0], records[2], records[3]].map(\.recordID))
        #expect(again.map(\.attempts) == [0, 0, 0])

        // The other replica's lease ran out and a third took the rows: the late give-back
        // leaves them with the third.
        clock.advance(61)
        let third = try await made.open()
        let taken = try await third.dueEntries(sink: "hook", now: clock.now, limit: 10)
        #expect(Set(taken.map(\.record.recordID)) == Set(records.map(\.recordID)))
        try await other.unclaim(sink: "hook", again)
        #expect(try await made.store.dueEntries(sink: "hook", now: clock.now, limit: 10).isEmpty)
    }
}
