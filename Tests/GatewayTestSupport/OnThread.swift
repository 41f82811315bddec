import Foundation

/// Runs `body` on a thread of its own and awaits its result.
///
/// For what blocks (a child process, a lock, a socket read): Swift's cooperative pool has
/// one thread per core, and a test blocking them all stalls every other test in the run,
/// down to the servers they answer with.
public func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}

/// `onThread` for a body that cannot fail.
public func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: body()) }
    }
}
