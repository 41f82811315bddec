import Foundation

/// A provider whose payloads become records only after an outside call, such as an
/// AdServices token that Apple resolves.
///
/// The payload is accepted and kept as ``PendingWork`` first (that is what a `2xx`
/// acknowledges); a ``PendingResolver`` then calls ``resolve(_:)`` until it finishes,
/// with the retry schedule kept in the store so that a restart resumes it.
public protocol DeferredAttributionProvider: AttributionProvider {
    /// How many resolutions may be in flight at once.
    var resolveConcurrency: Int { get }
    /// How long an HTTP caller waits for the first attempt before it is answered `pending`.
    var answerWait: Duration { get }
    /// Validates a payload and returns what to keep. Pure, like `normalize`; throws
    /// ``GatewayError`` naming the field.
    func accept(_ payload: IngestPayload) throws -> PendingWork
    /// One attempt at finishing `work`. Never throws: every failure is a step.
    func resolve(_ work: PendingWork) async -> ResolutionStep
    /// What `work`'s record says until its answer comes (`resolution: pending`, the app's
    /// fields), for reports that count it meanwhile; nil when its state cannot be read.
    func waitingRecord(_ work: PendingWork) -> AttributionRecord?
}

/// An accepted payload waiting for its outside answer.
public struct PendingWork: Sendable, Equatable {
    /// The id its record will have; the caller gets it at once.
    public var recordID: String
    public var provider: String
    /// Two payloads with the same key are the same work (and the same record).
    public var dedupeKey: String
    public var appID: String?
    public var receivedAt: Date
    /// The provider's own state, opaque to the store but for the members that name its
    /// user (see ``PendingStore``); ``ResolutionStep/retry`` replaces it.
    public var state: Data
    /// Attempts made so far.
    public var attempts: Int

    public init(
        recordID: String = AttributionRecord.newRecordID(), provider: String, dedupeKey: String, appID: String?,
        receivedAt: Date, state: Data, attempts: Int = 0
    ) {
        self.recordID = recordID
        self.provider = provider
        self.dedupeKey = dedupeKey
        self.appID = appID
        self.receivedAt = receivedAt
        self.state = state
        self.attempts = attempts
    }
}

/// The outcome of one attempt at resolving pending work.
public enum ResolutionStep: Sendable, Equatable {
    /// Done: these records (the first with the work's `recordID`) replace the work.
    case finished([AttributionRecord])
    /// Try again after `delay`, keeping `state` (which may count what happened so far).
    case retry(after: Duration, error: String, state: Data)
}

/// What the store did with newly accepted pending work.
public enum PendingAdmission: Sendable, Equatable {
    case accepted(recordID: String)
    /// The same dedupe key is already a record (`resolved`) or still pending.
    case duplicate(of: String, resolved: Bool)
}
