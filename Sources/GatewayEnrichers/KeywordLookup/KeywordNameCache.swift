import Foundation
import GRDB
import GatewayStorage
import Synchronization

/// Names already fetched, in the gateway's SQLite file so that a restart does not ask
/// Apple again. Entries expire after a TTL; an id Apple does not know is remembered as
/// unknown for a shorter while. Deleted entities keep their names (Apple still returns them).
struct KeywordNameCache: Sendable {
    struct Entry: Sendable, Equatable {
        var name: String?
        var matchType: String?
        var fetchedAt: Date
    }

    let pool: DatabasePool

    init(path: String) throws {
        pool = try SQLiteDatabase.pool(path: path)
        try pool.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE IF NOT EXISTS apple_ads_names (
                        key TEXT PRIMARY KEY, name TEXT, match_type TEXT, fetched_at REAL NOT NULL);
                    CREATE TABLE IF NOT EXISTS apple_ads_names_owed (
                        record_id TEXT PRIMARY KEY, since REAL NOT NULL);
                    """)
        }
    }

    func entries(_ keys: [String]) async throws -> [String: Entry] {
        guard !keys.isEmpty else { return [:] }
        let list = String(decoding: try JSONEncoder().encode(keys), as: UTF8.self)
        return try await pool.read { db in
            var found: [String: Entry] = [:]
            for row in try Row.fetchAll(
                db, sql: "SELECT * FROM apple_ads_names WHERE key IN (SELECT value FROM json_each(?))",
                arguments: [list])
            {
                found[row["key"]] = Entry(
                    name: row["name"], matchType: row["match_type"],
                    fetchedAt: Date(timeIntervalSince1970: row["fetched_at"]))
            }
            return found
        }
    }

    func store(_ key: String, _ entry: Entry) async throws {
        try await store([key: entry])
    }

    /// Many entries in one transaction (a report's thousands of names, one commit each,
    /// would take minutes).
    func store(_ entries: [String: Entry]) async throws {
        try await pool.write { db in
            for (key, entry) in entries {
                try db.execute(
                    sql:
                        "INSERT OR REPLACE INTO apple_ads_names (key, name, match_type, fetched_at) VALUES (?, ?, ?, ?)",
                    arguments: [key, entry.name, entry.matchType, entry.fetchedAt.timeIntervalSince1970])
            }
        }
    }
}

/// Records routed without a name that was still on its way: kept in the store, so that a
/// restart (a deploy during an Apple Ads outage) does not leave them nameless in every sink.
extension KeywordNameCache {
    func rememberOwed(_ recordIDs: [String], now: Date) async throws {
        guard !recordIDs.isEmpty else { return }
        try await pool.write { db in
            for id in recordIDs {
                try db.execute(
                    sql: "INSERT OR IGNORE INTO apple_ads_names_owed (record_id, since) VALUES (?, ?)",
                    arguments: [id, now.timeIntervalSince1970])
            }
        }
    }

    /// The records still owed a name, oldest first; those older than `since` are let go.
    func owed(since: Date) async throws -> [String] {
        try await letGoOwed(before: since)
        return try await pool.read { db in
            try String.fetchAll(db, sql: "SELECT record_id FROM apple_ads_names_owed ORDER BY since, record_id")
        }
    }

    func letGoOwed(before: Date) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "DELETE FROM apple_ads_names_owed WHERE since < ?", arguments: [before.timeIntervalSince1970])
        }
    }

    func forgetOwed(_ recordIDs: [String]) async throws {
        guard !recordIDs.isEmpty else { return }
        let list = String(decoding: try JSONEncoder().encode(recordIDs), as: UTF8.self)
        try await pool.write { db in
            try db.execute(
                sql: "DELETE FROM apple_ads_names_owed WHERE record_id IN (SELECT value FROM json_each(?))",
                arguments: [list])
        }
    }
}

/// One fetch per name however many records wait for it, and waits that end at a deadline
/// while the fetch goes on (and fills the cache) in the background.
actor NameFetches {
    private var waiters: [String: [(id: Int, continuation: CheckedContinuation<KeywordNameCache.Entry?, Never>)]] = [:]
    private var running: Set<String> = []
    /// Results of the last minute: a record that missed the cache just before a fetch
    /// finished must not start the same fetch again.
    private var recent: [String: (entry: KeywordNameCache.Entry?, at: ContinuousClock.Instant)] = [:]
    private var nextID = 0
    /// Keys whose fetch has failed at least once and is retrying (Apple Ads down, refusing
    /// or throttling): records do not wait for them. Waiting the whole `wait` for each made
    /// an outage of Apple Ads hold every AdServices record a second, one after another.
    private var failing: Set<String> = []
    /// How many fetches were started, for tests and metrics.
    private(set) var started = 0

    /// Starts `fetch` unless it runs or just ran; `then` runs once it is marked finished.
    func start(
        _ key: String, _ fetch: @escaping @Sendable () async -> KeywordNameCache.Entry?,
        then: @escaping @Sendable () async -> Void = {}
    ) {
        if let done = recent[key], ContinuousClock.now - done.at < .seconds(60) { return }
        guard !running.contains(key) else { return }
        running.insert(key)
        started += 1
        Task {
            let entry = await fetch()
            self.finish(key, entry)
            await then()
        }
    }

    /// A group fetch's report that one of its keys is done, before the rest are.
    typealias KeyDone = @Sendable (String, KeywordNameCache.Entry?) async -> Void

    /// Starts one fetch for several keys (a bulk query) if none of them runs or just ran;
    /// each key finishes with its own entry, then `then` runs for it: as soon as the fetch
    /// reports it done, else when the whole fetch ends. Held to the end, the names a bulk
    /// query found waited for the one key of the group Apple kept failing, up to an hour.
    func startGroup(
        _ keys: [String],
        _ fetch: @escaping @Sendable ([String], _ done: @escaping KeyDone) async -> [String: KeywordNameCache.Entry],
        then: @escaping @Sendable (String) async -> Void
    ) {
        let now = ContinuousClock.now
        let fresh = keys.filter { key in
            !running.contains(key) && !(recent[key].map { now - $0.at < .seconds(60) } ?? false)
        }
        guard !fresh.isEmpty else { return }
        running.formUnion(fresh)
        started += 1
        Task {
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

    func isRunning(_ key: String) -> Bool { running.contains(key) }

    /// Running and answered by a failure so far (retrying): not worth waiting for.
    func isFailing(_ key: String) -> Bool { running.contains(key) && failing.contains(key) }

    /// True when a fetch for `key` finished within the last minute.
    func finishedRecently(_ key: String) -> Bool {
        recent[key].map { ContinuousClock.now - $0.at < .seconds(60) } ?? false
    }

    /// The fetch of `key` failed and goes on retrying: its waiters go on without it.
    /// Returns true the first time, when the fetch starts failing.
    @discardableResult
    func markFailing(_ key: String) -> Bool {
        guard running.contains(key) else { return false }
        let first = failing.insert(key).inserted
        for waiter in waiters.removeValue(forKey: key) ?? [] { waiter.continuation.resume(returning: nil) }
        return first
    }

    /// Apple Ads answers again: every fetch that was failing is retried now, so each is
    /// worth waiting for again, and a record gets its names in one late version.
    func clearFailing() { failing.removeAll() }

    private func finish(_ key: String, _ entry: KeywordNameCache.Entry?) {
        running.remove(key)
        failing.remove(key)
        let now = ContinuousClock.now
        if recent.count > 10_000 { recent = recent.filter { now - $0.value.at < .seconds(60) } }
        // No entry (given up, or a record the API could not be asked for): nothing in the
        // cache either, so the next record with the id may ask.
        if entry != nil { recent[key] = (entry, now) }
        for waiter in waiters.removeValue(forKey: key) ?? [] { waiter.continuation.resume(returning: entry) }
    }

    /// The running fetch's result, or nil at the deadline.
    func wait(_ key: String, until deadline: ContinuousClock.Instant) async -> KeywordNameCache.Entry? {
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
