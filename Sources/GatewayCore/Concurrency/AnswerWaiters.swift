/// Lets an HTTP request wait a short while for an answer that work it just stored gets
/// elsewhere (a resolver's first attempt, a sink's delivery), so that a fast answer
/// reaches the caller in the same response.
///
/// The request calls ``expect(_:)`` before the work can be seen by whoever answers it, so
/// an answer that comes before the request starts waiting is kept rather than missed.
/// Answers for ids nobody expects are dropped: nothing is kept that no one will collect.
public actor AnswerWaiters<Answer: Sendable> {
    private enum Slot {
        case expected
        case waiting(CheckedContinuation<Answer?, Never>)
        case answered(Answer?)
    }
    private var slots: [String: Slot] = [:]

    public init() {}

    public func expect(_ id: String) {
        slots[id] = .expected
    }

    /// The answer; nil when `timeout` passes first, the work ended without one, or `id`
    /// was not expected.
    public func wait(for id: String, timeout: Duration) async -> Answer? {
        switch slots[id] {
        case .answered(let answer):
            slots[id] = nil
            return answer
        case .expected:
            break
        case .waiting, nil:
            return nil
        }
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            await self?.attempted(id, answer: nil)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            slots[id] = .waiting(continuation)
        }
    }

    /// Reports the outcome of the work behind `id` to whoever waits for it; nil says the
    /// attempt ended without an answer, so that the waiter need not wait out its timeout.
    public func attempted(_ id: String, answer: Answer?) {
        switch slots[id] {
        case .expected:
            slots[id] = .answered(answer)
        case .waiting(let continuation):
            slots[id] = nil
            continuation.resume(returning: answer)
        case .answered, nil:
            break
        }
    }

    /// Forgets `id` (its request has been answered).
    public func forget(_ id: String) {
        if case .waiting(let continuation) = slots.removeValue(forKey: id) {
            continuation.resume(returning: nil)
        }
    }
}
