import Synchronization

/// One fetch per name however many records wait for it, and waits that end at a deadline
/// while the fetch goes on (and fills the cache) in the background.
actor NameFetches {
    private var waiters: [String: [(id: Int, continuation: CheckedContinuation<KeywordNameEntry?, Never>)]] = [:]
    private var running: Set<String> = []
    /// Results of the last minute: a record that missed the cache just before a fetch
    /// finished must not start the same fetch again.
    private var recent: [String: (entry: KeywordNameEntry?, at: ContinuousClock.Instant)] = [:]
    private var nextID = 0
    /// Keys whose fetch has failed at least once and is retrying (Apple Ads down, refusing
    /// or throttling): records do not wait for them. Waiting the whole `wait` for each made
    /// an outage of Apple Ads hold every AdServices record a second, one after another.
    private var failing: Set<String> = []
    /// Those of `failing` marked only because Apple paused every request (``markAllFailing()``).
    private var held: Set<String> = []
    /// How many fetches were started, for tests and metrics.
    private(set) var started = 0
    /// The fetches under way, to end when the enricher stops.
    private var tasks: [Int: Task<Void, Never>] = [:]
    /// Set once the enricher stopped: nothing more starts.
    private var stopped = false

    /// Starts `fetch` unless it runs or just ran; `then` runs once it is marked finished.
    func start(
        _ key: String, _ fetch: @escaping @Sendable () async -> KeywordNameEntry?,
        then: @escaping @Sendable () async -> Void = {}
    ) {
        if let done = recent[key], ContinuousClock.now - done.at < .seconds(60) { return }
        guard !stopped, !running.contains(key) else { return }
        running.insert(key)
        started += 1
        track {
            let entry = await fetch()
            await self.finish(key, entry)
            await then()
        }
    }

    /// A group fetch's report that one of its keys is done, before the rest are.
    typealias KeyDone = @Sendable (String, KeywordNameEntry?) async -> Void

    /// Starts one fetch for several keys (a bulk query) if none of them runs or just ran;
    /// each key finishes with its own entry, then `then` runs for it: as soon as the fetch
    /// reports it done, else when the whole fetch ends. Held to the end, the names a bulk
    /// query found waited for the one key of the group Apple kept failing, up to an hour.
    func startGroup(
        _ keys: [String],
        _ fetch: @escaping @Sendable ([String], _ done: @escaping KeyDone) async -> [String: KeywordNameEntry],
        then: @escaping @Sendable (String) async -> Void
    ) {
        let now = ContinuousClock.now
        let fresh = keys.filter { key in
            !running.contains(key) && !(recent[key].map { now - $0.at < .seconds(60) } ?? false)
        }
        guard !stopped, !fresh.isEmpty else { return }
        running.formUnion(fresh)
        started += 1
        track {
            // This group's own keys, each finished once (a later fetch of the same key is
            // another's to finish).
            let finished = Mutex<Set<String>>([])
            let done: KeyDone = { key, entry in
                guard finished.withLock({ $0.insert(key).inserted }) else { return }
                await self.finish(key, entry)
                await then(key)
            }
            let entries = await fetch(fresh, done)
            for key in fresh { await done(key, entries[key]) }
        }
    }

    /// Runs `work` as a fetch to end when the enricher stops.
    private func track(_ work: @escaping @Sendable () async -> Void) {
        nextID += 1
        let id = nextID
        tasks[id] = Task {
            await work()
            self.untrack(id)
        }
    }

    private func untrack(_ id: Int) { tasks[id] = nil }

    /// Ends every fetch (each gives up as a failed one does, and its records' names stay
    /// owed in the store) and starts no more: the enricher was stopped or replaced, and
    /// its retries, up to an hour each, would go on asking Apple Ads with old credentials.
    func stop() {
        stopped = true
        for task in tasks.values { task.cancel() }
    }

    func isRunning(_ key: String) -> Bool { running.contains(key) }

    /// True when a fetch for `key` finished within the last minute.
    func finishedRecently(_ key: String) -> Bool {
        recent[key].map { ContinuousClock.now - $0.at < .seconds(60) } ?? false
    }

    /// The fetch of `key` failed and goes on retrying: its waiters go on without it.
    /// Returns true the first time, when the fetch starts failing.
    @discardableResult
    func markFailing(_ key: String) -> Bool {
        guard running.contains(key) else { return false }
        held.remove(key)
        let first = failing.insert(key).inserted
        for waiter in waiters.removeValue(forKey: key) ?? [] { waiter.continuation.resume(returning: nil) }
        return first
    }

    /// Every fetch running (Apple asked every request to wait) counts as failing: their
    /// waiters go on. Returns the keys that were not failing yet.
    func markAllFailing() -> [String] {
        let marked = running.filter { markFailing($0) }
        held.formUnion(marked)
        return Array(marked)
    }

    /// Whether `key`'s name is still to come for a record already waiting late for it: its
    /// fetch runs and is not failing, or is held only by Apple's pause, after which it
    /// answers, so the record waits to get all its names in one late version.
    func isComing(_ key: String) -> Bool {
        running.contains(key) && (!failing.contains(key) || held.contains(key))
    }

    /// Apple Ads answers again: every fetch that was failing is retried now, so each is
    /// worth waiting for again, and a record gets its names in one late version.
    func clearFailing() {
        failing.removeAll()
        held.removeAll()
    }

    private func finish(_ key: String, _ entry: KeywordNameEntry?) {
        running.remove(key)
        failing.remove(key)
        held.remove(key)
        let now = ContinuousClock.now
        if recent.count > 10_000 { recent = recent.filter { now - $0.value.at < .seconds(60) } }
        // No entry (given up, or a record the API could not be asked for): nothing in the
        // cache either, so the next record with the id may ask.
        if entry != nil { recent[key] = (entry, now) }
        for waiter in waiters.removeValue(forKey: key) ?? [] { waiter.continuation.resume(returning: entry) }
    }

    /// The running fetch's result, or nil at the deadline.
    func wait(_ key: String, until deadline: ContinuousClock.Instant) async -> KeywordNameEntry? {
        if let done = recent[key], ContinuousClock.now - done.at < .seconds(60) { return done.entry }
        guard running.contains(key), !failing.contains(key) else { return nil }
        nextID += 1
        let id = nextID
        let timer = Task { [weak self] in
            try? await Task.sleep(until: deadline)
            await self?.expire(key, id)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            waiters[key, default: []].append((id, continuation))
        }
    }

    private func expire(_ key: String, _ id: Int) {
        guard var list = waiters[key], let index = list.firstIndex(where: { $0.id == id }) else { return }
        list.remove(at: index).continuation.resume(returning: nil)
        waiters[key] = list.isEmpty ? nil : list
    }
}
