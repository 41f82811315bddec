import Synchronization

/// Runs `work`, or throws `late()` once `timeout` has passed without an answer.
///
/// The caller has its answer at the limit even when `work` does not end on cancellation (a
/// statement already sent waits for the server's reply): `work` is cancelled and left to end
/// by itself, its result dropped. The caller's own cancellation answers at once.
public func withinLimit<T: Sendable>(
    _ timeout: Duration, else late: @escaping @Sendable () -> any Error,
    _ work: @escaping @Sendable () async throws -> T
) async throws -> T {
    let answer = FirstAnswer<T>()
    let worker = Task {
        do { answer.give(.success(try await work())) } catch { answer.give(.failure(error)) }
    }
    let timer = Task {
        do { try await Task.sleep(for: timeout) } catch { return }
        answer.give(.failure(late()))
    }
    defer {
        worker.cancel()
        timer.cancel()
    }
    return try await withTaskCancellationHandler {
        try await answer.value()
    } onCancel: {
        answer.give(.failure(CancellationError()))
    }
}

/// The first of several results, for one waiter.
private final class FirstAnswer<T: Sendable>: Sendable {
    private enum State {
        case waiting(CheckedContinuation<T, any Error>?)
        case given(Result<T, any Error>)
    }

    private let state = Mutex(State.waiting(nil))

    /// Keeps `result` if it is the first, and hands it to the waiter; later ones are dropped.
    func give(_ result: Result<T, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<T, any Error>? in
            guard case .waiting(let waiter) = state else { return nil }
            state = .given(result)
            return waiter
        }
        waiter?.resume(with: result)
    }

    func value() async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let given: Result<T, any Error>? = state.withLock { state in
                switch state {
                case .waiting:
                    state = .waiting(continuation)
                    return nil
                case .given(let result):
                    return result
                }
            }
            if let given { continuation.resume(with: given) }
        }
    }
}
