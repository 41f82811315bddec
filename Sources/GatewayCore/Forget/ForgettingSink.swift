import Foundation

/// A sink as its worker drives it: forget requests (records of kind `forget`) go to the
/// sink's ``AttributionSink/forget(_:)``, and their answers to the store; every other
/// record to the sink as it is. So a forget request takes the outbox's way — claims,
/// retries, backoff, dead letters — with no path of its own in the worker.
public struct ForgettingSink: AttributionSink {
    public let sinkName: String
    public let base: any AttributionSink
    let store: any ForgetStore
    let now: @Sendable () -> Date

    public init(
        _ base: any AttributionSink, sinkName: String, store: any ForgetStore,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.base = base
        self.sinkName = sinkName
        self.store = store
        self.now = now
    }

    public var maxBatchSize: Int { base.maxBatchSize }
    public var countsEveryCopy: Bool { base.countsEveryCopy }
    public func shutdown() async { await base.shutdown() }

    public func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
        try await deliver(records, progress: .none)
    }

    public func deliver(_ records: [AttributionRecord], progress: DeliveryProgress) async throws -> [DeliveryOutcome] {
        let signals = records.indices.filter { records[$0].kind != .forget }
        guard signals.count < records.count else { return try await base.deliver(records, progress: progress) }
        var outcomes = [DeliveryOutcome?](repeating: nil, count: records.count)
        if !signals.isEmpty {
            // The sink counts its records from 0; the worker, the batch's.
            let mapped = DeliveryProgress(
                sending: { try await progress.sending(signals[$0]) },
                answered: { await progress.answered(signals[$0], $1) })
            let answers = try await base.deliver(signals.map { records[$0] }, progress: mapped)
            guard answers.count == signals.count else { return answers }
            for (index, answer) in zip(signals, answers) { outcomes[index] = answer }
        }
        for index in records.indices where records[index].kind == .forget {
            outcomes[index] = await forget(requestID: records[index].recordID)
        }
        return outcomes.map { $0 ?? .retry(reason: "not answered") }
    }

    /// A deletion cut short by a stop is asked again: asking twice deletes nothing more.
    public func interruptedSend(of record: AttributionRecord) -> DeliveryOutcome {
        record.kind == .forget
            ? .retry(reason: "the gateway stopped while it was being sent") : base.interruptedSend(of: record)
    }

    public func forget(_ request: ForgetRequest) async throws -> ForgetOutcome {
        try await base.forget(request)
    }

    /// `text` (a destination's answer, which may quote what it was sent) with the user's ids
    /// taken out: it goes into log lines, dead letters and the request's status.
    static func withoutIDs(_ text: String, of request: ForgetRequest) -> String {
        let ids = request.identifiers
        let named = ids.appUserIDs + ids.idfvs + ids.idfas + ids.vendorIDs.values.flatMap { $0 }
        return SecretText.removing(named, from: text, as: "user id")
    }

    /// Carries out one request and writes the answer; what the worker makes of the row.
    func forget(requestID: String) async -> DeliveryOutcome {
        let request: ForgetRequest?
        do {
            request = try await store.forgetRequest(id: requestID, sink: sinkName)
        } catch {
            return .retry(reason: "the forget request cannot be read: \(error)", after: .zero)
        }
        // Every sink has answered: nothing left to do.
        guard let request else { return .delivered }
        let outcome: ForgetOutcome
        do {
            outcome = try await base.forget(request).naming(nothingOf: request)
        } catch {
            return .retry(reason: Self.withoutIDs("\(error)", of: request))
        }
        let answer: ForgetAnswer
        let delivery: DeliveryOutcome
        switch outcome {
        case .done:
            (answer, delivery) = (.done, .delivered)
        case .notSupported(let reason):
            (answer, delivery) = (.notSupported(reason: reason), .declined(reason: reason))
        case .inProgress(let note, let checkAfter):
            (answer, delivery) = (.inProgress(note: note), .checkLater(reason: note, after: checkAfter))
        case .retry(let reason, let after):
            return .retry(reason: reason, after: after)
        case .failed(let reason):
            return .reject(reason: reason)
        }
        do {
            try await store.forgetAnswered(requestID: requestID, sink: sinkName, answer: answer, now: now())
        } catch {
            // Asked again later: a second deletion finds nothing more to delete.
            return .retry(reason: "the answer could not be written: \(error)")
        }
        return delivery
    }
}

extension ForgetOutcome {
    /// The outcome with the user's ids taken out of its reason or note.
    func naming(nothingOf request: ForgetRequest) -> ForgetOutcome {
        func clean(_ text: String) -> String { ForgettingSink.withoutIDs(text, of: request) }
        switch self {
        case .done: return .done
        case .notSupported(let reason): return .notSupported(reason: clean(reason))
        case .inProgress(let note, let after): return .inProgress(note: clean(note), checkAfter: after)
        case .retry(let reason, let after): return .retry(reason: clean(reason), after: after)
        case .failed(let reason): return .failed(reason: clean(reason))
        }
    }
}
