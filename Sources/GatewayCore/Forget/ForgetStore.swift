import Foundation

/// Forget requests: the user's records reduced in the store, the request queued for every
/// sink, each sink's answer, and an audit trail that outlives the user's data.
///
/// The contract every backend keeps:
/// - ``forget(_:requestID:userDigest:sinks:now:)`` is one transaction: when it returns, the
///   user's records hold no id of theirs any more (each id is replaced by a pseudonym of the
///   request's own, so that the report still joins a user's install to their purchases),
///   no raw payload and no dedupe key that names them; their outbox rows and dead letters
///   are gone (nothing of the user is sent after the request); and the request is queued,
///   as a record of kind `forget`, in the outbox of every sink named;
/// - the ids found are kept with the request only until every sink has answered `done` or
///   `not_supported`; the audit row (request id, app, the SHA-256 of the id named, times,
///   each sink's outcome) stays.
public protocol ForgetStore: Sendable {
    /// Forgets `subject` in the store and queues the request for `sinks`. `userDigest` is
    /// the SHA-256 (hex) of ``ForgetSubject/namedID``.
    func forget(_ subject: ForgetSubject, requestID: String, userDigest: String, sinks: [String], now: Date)
        async throws -> ForgetStatus

    /// The request as `sink` is to carry it out, with what the sink noted at its last
    /// attempt; nil once every sink has answered (its ids are gone) or when unknown.
    func forgetRequest(id: String, sink: String) async throws -> ForgetRequest?

    /// Writes `sink`'s answer. A final one (`done`, `notSupported`) also takes the request
    /// out of the sink's outbox; once every sink has given one, the ids are dropped and the
    /// request's record with them. `inProgress` keeps its note for the next attempt.
    func forgetAnswered(requestID: String, sink: String, answer: ForgetAnswer, now: Date) async throws

    /// What became of the request, per sink; nil when no such request was made.
    func forgetStatus(id: String) async throws -> ForgetStatus?
}

/// A sink's answer to a forget request, as the store keeps it.
public enum ForgetAnswer: Sendable, Equatable {
    case done
    case notSupported(reason: String)
    /// Not final: the destination works on it; `note` is handed back at the next attempt.
    case inProgress(note: String)

    /// The answer as every backend stores it: the state a sink's status reads
    /// (``ForgetSinkStatus/State``), and its reason or note.
    public var stored: (state: String, reason: String?) {
        switch self {
        case .done: (ForgetSinkStatus.State.done.rawValue, nil)
        case .notSupported(let reason): (ForgetSinkStatus.State.notSupported.rawValue, reason)
        case .inProgress(let note): (ForgetSinkStatus.State.pending.rawValue, note)
        }
    }
}

/// Where a forget request stands.
public struct ForgetStatus: Sendable, Equatable {
    public var requestID: String
    public var appID: String
    /// SHA-256 (hex) of the id the request named.
    public var userDigest: String
    public var requestedAt: Date
    /// When the last sink gave a final answer.
    public var completedAt: Date?
    /// The user's records reduced in the store.
    public var recordsForgotten: Int
    public var sinks: [ForgetSinkStatus]

    public init(
        requestID: String, appID: String, userDigest: String, requestedAt: Date, completedAt: Date?,
        recordsForgotten: Int, sinks: [ForgetSinkStatus]
    ) {
        self.requestID = requestID
        self.appID = appID
        self.userDigest = userDigest
        self.requestedAt = requestedAt
        self.completedAt = completedAt
        self.recordsForgotten = recordsForgotten
        self.sinks = sinks
    }

    /// `done` once every sink has answered for good, `pending` before; `failed` when a
    /// sink's deletion is in the dead letters.
    public var overall: ForgetSinkStatus.State {
        if sinks.contains(where: { $0.state == .failed }) { return .failed }
        return completedAt == nil ? .pending : .done
    }
}

/// One sink's part of a forget request.
public struct ForgetSinkStatus: Sendable, Equatable {
    public enum State: String, Sendable, Equatable {
        case pending, done, failed
        case notSupported = "not_supported"
    }

    public var sink: String
    public var state: State
    /// Why it failed, why it is not supported, or the last retry's error.
    public var reason: String?

    public init(sink: String, state: State, reason: String? = nil) {
        self.sink = sink
        self.state = state
        self.reason = reason
    }

    /// The status of `sink` from its rows: its answer, else its dead letter, else its
    /// outbox row; a sink with none of them had its dead letter dropped (`dlq drop`).
    public static func from(
        sink: String, answer: (state: String, reason: String?)?, deadLetterError: String?, queued: Bool,
        lastError: String?
    ) -> ForgetSinkStatus {
        if let answer, let state = State(rawValue: answer.state), state != .pending {
            return ForgetSinkStatus(sink: sink, state: state, reason: answer.reason)
        }
        if let deadLetterError { return ForgetSinkStatus(sink: sink, state: .failed, reason: deadLetterError) }
        // A deletion the destination works on says where it is (its note), else the last error.
        if queued { return ForgetSinkStatus(sink: sink, state: .pending, reason: lastError ?? answer?.reason) }
        return ForgetSinkStatus(sink: sink, state: .failed, reason: "dropped from the dead letters before it was done")
    }
}
