import Foundation

/// Records a sink gave up on, one per sink and record, until an operator retries or drops them.
public protocol DeadLetterStore: Sendable {
    /// Dead letters, newest first; `ids` are selected before the limit, so an old one is found.
    func deadLetters(sink: String?, ids: [Int64]?, limit: Int) async throws -> [DeadLetter]

    /// Moves dead letters back to their sink's outbox, due now; with `among`, only those of
    /// these sinks (the ones a server would drain). Returns how many.
    func retryDeadLetters(ids: [Int64]?, sink: String?, among sinks: [String]?, now: Date) async throws -> Int

    /// How many dead letters each sink has (of `ids` alone, when given).
    func deadLetterCounts(ids: [Int64]?) async throws -> [String: Int]

    /// Deletes dead letters for good. Returns how many.
    func dropDeadLetters(ids: [Int64]?, sink: String?) async throws -> Int
}

/// A record a sink gave up on.
public struct DeadLetter: Sendable {
    public var id: Int64
    public var sink: String
    public var recordID: String
    public var attempts: Int
    public var error: String
    public var failedAt: Date

    public init(id: Int64, sink: String, recordID: String, attempts: Int, error: String, failedAt: Date) {
        self.id = id
        self.sink = sink
        self.recordID = recordID
        self.attempts = attempts
        self.error = error
        self.failedAt = failedAt
    }
}

extension DeadLetterStore {
    /// Dead letters, newest first.
    public func deadLetters(sink: String?, limit: Int) async throws -> [DeadLetter] {
        try await deadLetters(sink: sink, ids: nil, limit: limit)
    }

    public func retryDeadLetters(ids: [Int64]?, sink: String?, now: Date) async throws -> Int {
        try await retryDeadLetters(ids: ids, sink: sink, among: nil, now: now)
    }
}
