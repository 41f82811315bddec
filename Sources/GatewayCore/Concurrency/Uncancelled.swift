/// Runs `work` in a task of its own, which the caller's cancellation does not reach.
///
/// For the writes that record what already happened (a sink's answers, Apple's): once a
/// shutdown cancels the caller, GRDB's async calls refuse to start, and the work done
/// before it would be done again after the restart.
public func uncancelled<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) async throws -> T {
    try await Task { try await work() }.value
}
