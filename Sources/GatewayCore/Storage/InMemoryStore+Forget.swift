import Foundation

extension InMemoryStore {
    public func forget(_ subject: ForgetSubject, requestID: String, userDigest: String, sinks: [String], now: Date)
        async throws -> ForgetStatus
    {
        let at = now.timeIntervalSince1970
        let carrier = AttributionRecord.forgetCarrier(requestID: requestID, appID: subject.appID, at: now)
        return try withState { state in
            var sweep = ForgetSweep(subject)
            for _ in 0..<ForgetSweep.maxRounds {
                var found = false
                for record in state.records {
                    guard let read = try? AttributionRecord(jsonData: Data(record.body.utf8)), sweep.matches(read)
                    else { continue }
                    found = sweep.add(read) || found
                }
                if !found { break }
            }
            let batch = [RoutedRecord(record: carrier, sinks: sinks)]
            try state.checkInsert(batch)
            for record in sweep.reduced() {
                guard let index = state.recordByID[Text(record.recordID)] else { continue }
                state.recordByKey[Text(state.records[index].dedupeKey)] = nil
                state.records[index].dedupeKey = record.dedupeKey
                state.records[index].body = record.encoded().text
                state.recordByKey[Text(record.dedupeKey)] = index
                state.forgetDeliveries(of: Text(record.recordID))
            }
            // Tokens of the user's still waiting for Apple would become records of theirs; the
            // ASA SDK user a token belongs to goes with it.
            let waiting = Set(
                state.pending.filter { $0.value.appID == subject.appID && sweep.matchesPending(state: $0.value.state) }
                    .keys)
            for key in waiting { state.removePending(recordID: key) }
            state.forgetSDKUsers(attributedTo: Set(sweep.matched.map { Text($0.recordID) }).union(waiting))
            // With no sink to ask, the request is done with the store's part.
            let done = sinks.isEmpty
            if !done { _ = state.insert(batch, bodies: [carrier.encoded().text], queuedAt: at) }
            let row = ForgetRow(
                appID: subject.appID, userDigest: userDigest, requestedAt: at, completedAt: done ? at : nil,
                recordsForgotten: sweep.matched.count, sinks: sinks, identifiers: done ? nil : sweep.identifiers)
            state.forgetRequests[Text(requestID)] = row
            return state.forgetStatus(requestID, row)
        }
    }

    public func forgetRequest(id: String, sink: String) async throws -> ForgetRequest? {
        try withState { state in
            guard let row = state.forgetRequests[Text(id)], let identifiers = row.identifiers else { return nil }
            let progress = row.answers[sink].flatMap { $0.state == "pending" ? $0.reason : nil }
            return ForgetRequest(
                requestID: id, appID: row.appID, requestedAt: Date(timeIntervalSince1970: row.requestedAt),
                identifiers: identifiers, progress: progress)
        }
    }

    public func forgetAnswered(requestID: String, sink: String, answer: ForgetAnswer, now: Date) async throws {
        try withState { state in
            let key = Text(requestID)
            guard var row = state.forgetRequests[key] else { return }
            row.answers[sink] = answer.stored
            // Still at work: the row stays, for the worker to schedule the next look.
            if case .inProgress = answer {
                state.forgetRequests[key] = row
                return
            }
            if let id = state.outboxByKey[RowKey(sink: Text(sink), recordID: key)] { state.removeOutboxRow(id: id) }
            if row.completedAt == nil, row.sinks.allSatisfy({ (row.answers[$0]?.state ?? "pending") != "pending" }) {
                row.completedAt = now.timeIntervalSince1970
                row.identifiers = nil
                state.forgetDeliveries(of: key)
                if let index = state.recordByID[key] { state.removeRecords(at: [index]) }
            }
            state.forgetRequests[key] = row
        }
    }

    public func forgetStatus(id: String) async throws -> ForgetStatus? {
        try withState { state in state.forgetRequests[Text(id)].map { state.forgetStatus(id, $0) } }
    }
}

extension InMemoryStore.State {
    /// Drops every outbox row and dead letter of a record: nothing of it is sent any more.
    mutating func forgetDeliveries(of recordID: Text) {
        for id in outbox.values.filter({ $0.recordID == recordID }).map(\.id) { removeOutboxRow(id: id) }
        for letter in deadLetters.values where Text(letter.recordID) == recordID { removeDeadLetter(id: letter.id) }
    }

    /// Drops the ASA SDK users whose attribution is one of `records`, with their App Store
    /// transactions: the user's own, as the SDK named them.
    mutating func forgetSDKUsers(attributedTo records: Set<Text>) {
        let users = Set(
            sdkUsers.filter { $0.value.attributionRecordID.map { records.contains(Text($0)) } ?? false }.keys)
        guard !users.isEmpty else { return }
        for id in users { sdkUsers[id] = nil }
        transactions.removeAll { users.contains($0.userID) }
        transactionOwners = transactionOwners.filter { !users.contains($0.value) }
    }

    func forgetStatus(_ requestID: String, _ row: InMemoryStore.ForgetRow) -> ForgetStatus {
        let key = Text(requestID)
        let sinks = row.sinks.map { sink in
            let rowKey = InMemoryStore.RowKey(sink: Text(sink), recordID: key)
            let queued = outboxByKey[rowKey].flatMap { outbox[$0] }
            return ForgetSinkStatus.from(
                sink: sink, answer: row.answers[sink],
                deadLetterError: deadLetterByKey[rowKey].flatMap { deadLetters[$0]?.error },
                queued: queued != nil, lastError: queued?.lastError)
        }
        return ForgetStatus(
            requestID: requestID, appID: row.appID, userDigest: row.userDigest,
            requestedAt: Date(timeIntervalSince1970: row.requestedAt),
            completedAt: row.completedAt.map(Date.init(timeIntervalSince1970:)),
            recordsForgotten: row.recordsForgotten, sinks: sinks)
    }
}
