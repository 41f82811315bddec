import Synchronization

/// Lets a sleeping worker be woken early: by new outbox rows, or by shutdown.
///
/// A signal that arrives while nobody waits is kept, so a wake-up between "found
/// nothing" and "start waiting" is not lost. `signal` is synchronous and cheap (a lock):
/// every stored request signals its sinks' workers, and a task per signal was a
/// measurable share of an ingest's CPU.
final class WakeUp: Sendable {
    private struct State {
        var pending = false
        var waiter: (id: Int, continuation: CheckedContinuation<Void, Never>)?
        var nextID = 0
        /// A wait whose timer fired (or whose task was cancelled) before its waiter was
        /// installed: it must return at once rather than sleep until some signal.
        var firedEarly: Int?
    }

    private let state = Mutex(State())

    func signal() {
        let waiter = state.withLock { state in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil as CheckedContinuation<Void, Never>?
            }
            state.waiter = nil
            return waiter.continuation
        }
        waiter?.resume()
    }

    /// Returns on a signal, after `timeout`, or when the task is cancelled.
    func wait(timeout: Duration) async {
        let id: Int? = state.withLock { state in
            if state.pending {
                state.pending = false
                return nil
            }
            state.nextID += 1
            return state.nextID
        }
        guard let id else { return }
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            self?.fire(id)
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                // Between taking the id and this point, a signal may have come (it set
                // `pending`, consumed here instead of waiting), or the timer or a
                // cancellation, which found no waiter yet and left `firedEarly`.
                let resumeNow = state.withLock { state in
                    if Task.isCancelled || state.firedEarly == id {
                        state.firedEarly = nil
                        return true
                    }
                    if state.pending {
                        state.pending = false
                        return true
                    }
                    state.waiter = (id, continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            self.fire(id)
        }
        timer.cancel()
    }

    private func fire(_ id: Int) {
        let waiter = state.withLock { state in
            guard let waiter = state.waiter, waiter.id == id else {
                // The wait with this id has not installed its waiter yet (the timer or
                // the cancellation beat it there): leave word for it.
                if state.waiter == nil && state.nextID == id { state.firedEarly = id }
                return nil as CheckedContinuation<Void, Never>?
            }
            state.waiter = nil
            return waiter.continuation
        }
        waiter?.resume()
    }
}
