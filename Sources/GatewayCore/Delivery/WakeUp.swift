/// Lets a sleeping worker be woken early: by new outbox rows, or by shutdown.
///
/// A signal that arrives while nobody waits is kept, so a wake-up between "found
/// nothing" and "start waiting" is not lost.
actor WakeUp {
    private var pending = false
    private var waiter: (id: Int, continuation: CheckedContinuation<Void, Never>)?
    private var nextID = 0

    func signal() {
        if let waiter {
            self.waiter = nil
            waiter.continuation.resume()
        } else {
            pending = true
        }
    }

    /// Returns on a signal, after `timeout`, or when the task is cancelled.
    func wait(timeout: Duration) async {
        if pending {
            pending = false
            return
        }
        nextID += 1
        let id = nextID
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            await self?.fire(id)
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                waiter = (id, continuation)
            }
        } onCancel: {
            Task { await self.fire(id) }
        }
        timer.cancel()
    }

    private func fire(_ id: Int) {
        guard let waiter, waiter.id == id else { return }
        self.waiter = nil
        waiter.continuation.resume()
    }
}
