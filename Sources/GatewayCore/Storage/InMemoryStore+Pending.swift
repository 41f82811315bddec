import Foundation

/// Pending work.
extension InMemoryStore {
    /// Work is a duplicate only of its own app's: the same key sent for another app is stored apart, under the key
    /// with the app appended, as the SQLite store does (see its `addPending`).
    public func addPending(_ work: PendingWork, now: Date) async throws -> PendingAdmission {
        let plain = Text(work.dedupeKey)
        let own = Text(work.dedupeKey + "@" + (work.appID ?? ""))
        return try withState { state in
            // The plain key's row before the app's own, as SQLite reads them in key order.
            let stored = [plain, own].map { key in
                state.recordByKey[key].map { (recordID: state.records[$0].recordID, appID: state.records[$0].appID) }
            }
            let waiting = [plain, own].map { key in
                state.pendingByKey[key].flatMap { state.pending[$0] }.map { (recordID: $0.recordID, appID: $0.appID) }
            }
            var keyTaken = false
            for (rows, resolved) in [(stored, true), (waiting, false)] {
                if let mine = rows.compactMap({ $0 }).first(where: { $0.appID == work.appID }) {
                    return .duplicate(of: mine.recordID, resolved: resolved)
                }
                keyTaken = keyTaken || rows[0] != nil
            }
            let key = keyTaken ? own : plain
            let recordID = Text(work.recordID)
            guard state.pendingByKey[key] == nil, state.pending[recordID] == nil else {
                throw ConstraintViolation(
                    description: "pending work \(work.recordID) or its key \(key.string) is pending already")
            }
            state.lastPendingRowID += 1
            state.pending[recordID] = PendingRow(
                rowID: state.lastPendingRowID, recordID: work.recordID, provider: work.provider,
                dedupeKey: key.string, appID: work.appID, receivedAt: work.receivedAt.timeIntervalSince1970,
                state: work.state, attempts: work.attempts, nextAttemptAt: now.timeIntervalSince1970, lastError: nil,
                claimedUntil: nil)
            state.pendingByKey[key] = recordID
            return .accepted(recordID: work.recordID)
        }
    }

    public func claimPending(provider: String, now: Date, lease: Duration, limit: Int) async throws -> [PendingWork] {
        let leaseEnd = now.addingTimeInterval(lease / .seconds(1)).timeIntervalSince1970
        let at = now.timeIntervalSince1970
        let providerText = Text(provider)
        return try withState { state in
            let due = state.pending.values.filter { Text($0.provider) == providerText && $0.nextAttemptAt <= at }
                .sorted { ($0.nextAttemptAt, $0.receivedAt, $0.rowID) < ($1.nextAttemptAt, $1.receivedAt, $1.rowID) }
                .prefix(Self.rows(limit))
            for row in due {
                state.pending[Text(row.recordID)]?.nextAttemptAt = leaseEnd
                state.pending[Text(row.recordID)]?.claimedUntil = leaseEnd
            }
            return due.map { row in
                var work = row.work
                work.provider = provider
                return work
            }
        }
    }

    public func nextPendingDate(provider: String) async throws -> Date? {
        let provider = Text(provider)
        return try withState { state in
            state.pending.values.filter { Text($0.provider) == provider }.map(\.nextAttemptAt).min()
        }.map { Date(timeIntervalSince1970: $0) }
    }

    public func settlePending(_ settlements: [PendingSettlement]) async throws -> [String: [IngestResult]] {
        guard !settlements.isEmpty else { return [:] }
        // Encoded, and each finished work's queueing time read, before the lock.
        let prepared = settlements.map { settlement -> (settlement: PendingSettlement, bodies: [String], at: Double) in
            guard case .finished(_, let records) = settlement else { return (settlement, [], 0) }
            return (settlement, records.map { $0.record.encoded().text }, now().timeIntervalSince1970)
        }
        let finished = settlements.flatMap { settlement -> [RoutedRecord] in
            guard case .finished(_, let records) = settlement else { return [] }
            return records
        }
        return try withState { state in
            try state.checkInsert(finished)
            var results: [String: [IngestResult]] = [:]
            for (settlement, bodies, queuedAt) in prepared {
                switch settlement {
                case .finished(let recordID, let records):
                    // Work a forget request dropped meanwhile stores nothing of its user.
                    guard state.pending[Text(recordID)] != nil else { continue }
                    results[recordID] = state.insert(records, bodies: bodies, queuedAt: queuedAt)
                    state.removePending(recordID: Text(recordID))
                case .retry(let recordID, let data, let attempts, let at, let error):
                    guard var row = state.pending[Text(recordID)] else { continue }
                    row.state = data
                    row.attempts = attempts
                    row.nextAttemptAt = at.timeIntervalSince1970
                    row.lastError = error
                    row.claimedUntil = nil
                    state.pending[Text(recordID)] = row
                }
            }
            return results
        }
    }

    public func pendingCounts() async throws -> [String: Int] {
        try withState { state in
            var counts: [String: Int] = [:]
            for row in state.pending.values { counts[row.provider, default: 0] += 1 }
            return counts
        }
    }

    public func isPending(recordID: String) async throws -> Bool {
        try withState { state in state.pending[Text(recordID)] != nil }
    }

    /// In record id order by bytes, as SQLite sorts text.
    public func waitingWork(after cursor: String?, limit: Int) async throws -> [PendingWork] {
        let cursor = cursor.map(Text.init)
        return try withState { state in
            state.pending.filter { id, _ in cursor.map { $0 < id } ?? true }.sorted { $0.key < $1.key }
                .prefix(Self.rows(limit)).map(\.value.work)
        }
    }
}

extension InMemoryStore.State {
    mutating func removePending(recordID: Text) {
        guard let row = pending.removeValue(forKey: recordID) else { return }
        pendingByKey[Text(row.dedupeKey)] = nil
    }

    /// The id of the record with this dedupe key when it is a purchase still `pending`.
    func pendingPurchase(dedupeKey: String) -> String? {
        guard let index = recordByKey[Text(dedupeKey)],
            let record = try? AttributionRecord(jsonData: Data(records[index].body.utf8)),
            record.resolution == .pending
        else { return nil }
        return records[index].recordID
    }
}

/// Users and transactions of the ASA Attribution SDK's backend contract.
extension InMemoryStore {
    /// A random id below 2^53, as the SQLite store gives (see its `createSDKUser`): ids counting up could be
    /// guessed.
    public func createSDKUser(now: Date) async throws -> SDKUser {
        try withState { state in
            while true {
                let id = Int64.random(in: 1...((1 << 53) - 1))
                guard state.sdkUsers[id] == nil else { continue }
                state.sdkUsers[id] = SDKUserRow(createdAt: now.timeIntervalSince1970, attributionRecordID: nil)
                return SDKUser(id: id, attributionRecordID: nil, createdAt: now)
            }
        }
    }

    public func sdkUser(id: Int64) async throws -> SDKUser? {
        try withState { state in
            state.sdkUsers[id].map {
                SDKUser(
                    id: id, attributionRecordID: $0.attributionRecordID,
                    createdAt: Date(timeIntervalSince1970: $0.createdAt))
            }
        }
    }

    public func sdkPendingPurchaseIDs(userID: Int64, keyPrefix: String) async throws -> [String] {
        try withState { state in
            state.transactions.filter { $0.userID == userID }.compactMap {
                state.pendingPurchase(dedupeKey: keyPrefix + $0.id)
            }
        }
    }

    public func sdkAnsweredUsersWithPendingPurchases(keyPrefix: String) async throws -> [String] {
        try withState { state in
            var seen = Set<Text>()
            var answered: [String] = []
            for transaction in state.transactions {
                // A user's record is stored only once Apple has answered (until then it is pending work).
                guard let recordID = state.sdkUsers[transaction.userID]?.attributionRecordID,
                    state.recordByID[Text(recordID)] != nil,
                    state.pendingPurchase(dedupeKey: keyPrefix + transaction.id) != nil,
                    seen.insert(Text(recordID)).inserted
                else { continue }
                answered.append(recordID)
            }
            return answered
        }
    }

    public func setSDKUserAttribution(userID: Int64, recordID: String) async throws {
        try withState { state in state.sdkUsers[userID]?.attributionRecordID = recordID }
    }

    public func associateTransaction(userID: Int64, transactionID: String, now: Date) async throws
        -> TransactionAssociation
    {
        try withState { state in
            let key = Text(transactionID)
            if let owner = state.transactionOwners[key] {
                return owner == userID ? .alreadyAssociated : .belongsTo(userID: owner)
            }
            // The SQLite table's foreign key: a transaction belongs to a user who exists.
            guard state.sdkUsers[userID] != nil else {
                throw ConstraintViolation(description: "no SDK user \(userID)")
            }
            state.transactionOwners[key] = userID
            state.transactions.append((id: transactionID, userID: userID))
            return .associated
        }
    }
}
