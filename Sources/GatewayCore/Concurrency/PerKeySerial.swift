/// Runs the work given for one key one at a time, in the order it came; work for other
/// keys runs alongside. For read-then-write sequences that two callers could interleave
/// (two creditings of one user's purchases each reading them `pending`).
public actor PerKeySerial<Key: Hashable & Sendable> {
    /// The last work queued for each key, done or not.
    private var tails: [Key: Task<Void, Never>] = [:]

    public init() {}

    public func run<T: Sendable>(_ key: Key, _ work: @escaping @Sendable () async throws -> T) async throws -> T {
        let previous = tails[key]
        let task = Task<Result<T, any Error>, Never> {
            await previous?.value
            do { return .success(try await work()) } catch { return .failure(error) }
        }
        let tail = Task<Void, Never> { _ = await task.value }
        tails[key] = tail
        let result = await task.value
        if tails[key] == tail { tails[key] = nil }
        return try result.get()
    }
}
