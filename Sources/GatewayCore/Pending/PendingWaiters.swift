/// Lets an HTTP request wait a short while for the first attempt at the work it just
/// stored, so that a fast outside answer reaches the caller in the same response.
///
/// The request calls ``expect(_:)`` before the resolver can see the work, so an answer
/// that comes before the request starts waiting is kept rather than missed.
actor PendingWaiters {
    private enum Slot {
        case expected
        case waiting(CheckedContinuation<AttributionRecord?, Never>)
        case answered(AttributionRecord?)
    }
    private var slots: [String: Slot] = [:]

    func expect(_ recordID: String) {
        slots[recordID] = .expected
    }

    /// The finished record; nil when `timeout` passes first or the work was rescheduled.
    func wait(for recordID: String, timeout: Duration) async -> AttributionRecord? {
        switch slots[recordID] {
        case .answered(let record):
            slots[recordID] = nil
            return record
        case .expected:
            break
        case .waiting, nil:
            return nil
        }
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            await self?.attempted(recordID, finished: nil)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            slots[recordID] = .waiting(continuation)
        }
    }

    /// Reports the first attempt's outcome to whoever waits for `recordID`.
    func attempted(_ recordID: String, finished record: AttributionRecord?) {
        switch slots[recordID] {
        case .expected:
            slots[recordID] = .answered(record)
        case .waiting(let continuation):
            slots[recordID] = nil
            continuation.resume(returning: record)
        case .answered, nil:
            break
        }
    }

    /// Forgets `recordID` (its request has been answered).
    func forget(_ recordID: String) {
        if case .waiting(let continuation) = slots.removeValue(forKey: recordID) {
            continuation.resume(returning: nil)
        }
    }
}
