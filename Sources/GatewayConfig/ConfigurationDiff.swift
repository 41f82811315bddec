import GatewayCore

/// What a reload from one checked configuration to another changes, one entry per change,
/// in a fixed order of sections: for `check-config --diff` and for the log of a reload.
/// No entry holds a secret's value (keys, tokens, secrets, URLs' credentials and queries),
/// nor any value taken from the environment.
public struct ConfigurationDiff: Sendable {
    /// Where a change is, in the order they are listed.
    public enum Section: String, Sendable, CaseIterable, Comparable {
        case sinks, providers, enrichers, routes, auth
        case rateLimits = "rate_limits"
        case server, storage

        public static func < (a: Section, b: Section) -> Bool {
            allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
        }
    }

    public struct Change: Sendable, Equatable, CustomStringConvertible {
        public var section: Section
        /// The change in words, without the section's name.
        public var text: String
        /// False for what a running process cannot take: the listen address and the
        /// server's other settings but its log level, and the store.
        public var canApplyLive: Bool

        public var description: String { text }
    }

    public var changes: [Change]

    public var isEmpty: Bool { changes.isEmpty }

    public init(from old: GatewayConfiguration, to new: GatewayConfiguration) {
        changes =
            Self.plugins(
                .sinks, "sink", old.sinks.map { ($0.name, $0.prepared.typeName) },
                new.sinks.map { ($0.name, $0.prepared.typeName) }, old, new)
            + Self.plugins(
                .providers, "provider", old.providers.map { ($0.typeName, $0.typeName) },
                new.providers.map { ($0.typeName, $0.typeName) }, old, new)
            + Self.plugins(
                .enrichers, "enricher", old.enrichers.map { ($0.typeName, $0.typeName) },
                new.enrichers.map { ($0.typeName, $0.typeName) }, old, new)
            + Self.routes(old.routes, new.routes) + Self.keys(old.auth.apiKeys, new.auth.apiKeys)
            + Self.operatorKeys(old.auth.operatorKeys, new.auth.operatorKeys)
            + Self.rateLimits(old.server.rateLimits, new.server.rateLimits) + Self.server(old.server, new.server)
            + Self.storage(old.storage, new.storage)
    }

    /// The provider that brought a destination with it (`s2s` for `s2s.singular`): names
    /// under `sinks:` have no '.'.
    public static func provider(ofSink name: String) -> String? {
        name.firstIndex(of: ".").map { String(name[..<$0]) }
    }

    /// Added, removed (or for providers and enrichers, enabled and disabled) and changed
    /// plugins by name; a changed one lists each setting that differs.
    static func plugins(
        _ section: Section, _ kind: String, _ old: [(name: String, type: String)],
        _ new: [(name: String, type: String)],
        _ oldConfiguration: GatewayConfiguration, _ newConfiguration: GatewayConfiguration
    ) -> [Change] {
        let (added, removed) = section == .sinks ? ("added", "removed") : ("enabled", "disabled")
        let oldNames = Set(old.map(\.name))
        let newNames = Set(new.map(\.name))
        var changes: [Change] = []
        for (name, type) in new where !oldNames.contains(name) {
            changes.append(
                Change(
                    section: section, text: "\(kind) \(name): \(added) (\(type))", canApplyLive: true))
        }
        for (name, type) in old where !newNames.contains(name) {
            changes.append(
                Change(
                    section: section, text: "\(kind) \(name): \(removed) (\(type))", canApplyLive: true))
        }
        for (name, _) in new where oldNames.contains(name) {
            // A provider's own destinations (`s2s.singular`) have no settings of their own:
            // their provider's line says what changed.
            let key = "\(section.rawValue).\(name)"
            guard let before = oldConfiguration.pluginSettings[key], let after = newConfiguration.pluginSettings[key]
            else { continue }
            let settings = after.changes(from: before)
            if !settings.isEmpty {
                changes.append(
                    Change(
                        section: section, text: "\(kind) \(name): changed \(settings.joined(separator: "; "))",
                        canApplyLive: true))
            }
        }
        return changes
    }

    /// Routes added and removed, by what they select and where it goes; their order does
    /// not matter, since a record goes to every sink of every route it matches.
    static func routes(_ old: [Route], _ new: [Route]) -> [Change] {
        func described(_ routes: [Route]) -> [String] {
            routes.map { route in "\(route.filter.summary) -> \(route.sinks.joined(separator: ", "))" }
        }
        var remaining = described(old)
        var added: [String] = []
        for route in described(new) {
            if let index = remaining.firstIndex(of: route) {
                remaining.remove(at: index)
            } else {
                added.append(route)
            }
        }
        return added.map { Change(section: .routes, text: "route added: \($0)", canApplyLive: true) }
            + remaining.map { Change(section: .routes, text: "route removed: \($0)", canApplyLive: true) }
    }

    /// Keys added and removed per app, as counts: never a key, nor its digest.
    static func keys(_ old: [AuthSettings.Key], _ new: [AuthSettings.Key]) -> [Change] {
        func held(_ keys: [AuthSettings.Key], app: String) -> Set<[UInt8]> {
            Set(keys.filter { $0.appID == app }.map { $0.sha256 + Array($0.scope.rawValue.utf8) })
        }
        return Set(old.map(\.appID)).union(new.map(\.appID)).sorted().compactMap { app in
            let before = held(old, app: app)
            let after = held(new, app: app)
            let added = after.subtracting(before).count
            let removed = before.subtracting(after).count
            guard added + removed > 0 else { return nil }
            return Change(
                section: .auth, text: "auth.api_keys app \(app): \(added) added, \(removed) removed", canApplyLive: true
            )
        }
    }

    /// Operator keys added and removed, as counts.
    static func operatorKeys(_ old: [[UInt8]], _ new: [[UInt8]]) -> [Change] {
        let added = Set(new).subtracting(old).count
        let removed = Set(old).subtracting(new).count
        guard added + removed > 0 else { return [] }
        return [
            Change(section: .auth, text: "auth.operator_keys: \(added) added, \(removed) removed", canApplyLive: true)
        ]
    }

    static func rateLimits(_ old: RateLimits, _ new: RateLimits) -> [Change] {
        func shown(_ limit: RateLimits.Limit?) -> String {
            limit.map { "\(Int($0.rate))/s, burst \(Int($0.burst))" } ?? "off"
        }
        let limits: [(String, RateLimits.Limit?, RateLimits.Limit?)] = [
            ("per_key", old.perKey, new.perKey), ("per_ip", old.perIP, new.perIP),
            ("open_routes_per_ip", old.openRoutesPerIP, new.openRoutesPerIP),
        ]
        return limits.compactMap { key, before, after in
            before == after
                ? nil
                : Change(
                    section: .rateLimits, text: "server.rate_limits.\(key): \(shown(before)) -> \(shown(after))",
                    canApplyLive: true)
        }
    }

    static func server(_ old: ServerSettings, _ new: ServerSettings) -> [Change] {
        func optional(_ value: Int?) -> String { value.map(String.init) ?? "default" }
        func networks(_ list: [IPNetwork]) -> String { list.count == 1 ? "1 network" : "\(list.count) networks" }
        // The log level applies live; the rest is wired into the listener and its
        // connections at the start.
        let fields: [(String, String, String, Bool)] = [
            ("host", old.host, new.host, false), ("port", "\(old.port)", "\(new.port)", false),
            ("max_body_bytes", "\(old.maxBodyBytes)", "\(new.maxBodyBytes)", false),
            ("noop_route", "\(old.noopRoute)", "\(new.noopRoute)", false),
            ("log_level", old.logLevel, new.logLevel, true), ("log_format", old.logFormat, new.logFormat, false),
            ("access_log", "\(old.accessLog)", "\(new.accessLog)", false),
            ("ready_max_outbox_age_s", "\(old.readyMaxOutboxAge)", "\(new.readyMaxOutboxAge)", false),
            ("idle_timeout_ms", "\(old.idleTimeoutMs)", "\(new.idleTimeoutMs)", false),
            ("body_timeout_ms", "\(old.bodyTimeoutMs)", "\(new.bodyTimeoutMs)", false),
            ("max_connections", optional(old.maxConnections), optional(new.maxConnections), false),
            ("max_connections_per_ip", optional(old.maxConnectionsPerIP), optional(new.maxConnectionsPerIP), false),
            ("request_head_timeout_ms", "\(old.requestHeadTimeoutMs)", "\(new.requestHeadTimeoutMs)", false),
            ("shutdown_delay_s", "\(old.shutdownDelaySeconds)", "\(new.shutdownDelaySeconds)", false),
            ("shutdown_timeout_s", "\(old.shutdownTimeoutSeconds)", "\(new.shutdownTimeoutSeconds)", false),
        ]
        var changes = fields.compactMap { key, before, after, live in
            before == after
                ? nil : Change(section: .server, text: "server.\(key): \(before) -> \(after)", canApplyLive: live)
        }
        if Set(old.trustedProxies) != Set(new.trustedProxies) {
            let text = "server.trusted_proxies: \(networks(old.trustedProxies)) -> \(networks(new.trustedProxies))"
            changes.append(Change(section: .server, text: text, canApplyLive: false))
        }
        return changes
    }

    /// The store a process opened is the one it keeps: every change here waits for a start.
    static func storage(_ old: StorageSettings, _ new: StorageSettings) -> [Change] {
        func change(_ text: String) -> Change { Change(section: .storage, text: text, canApplyLive: false) }
        var changes: [Change] = []
        switch (old.postgres, new.postgres) {
        case (nil, nil):
            if old.sqlitePath != new.sqlitePath {
                changes.append(change("storage.sqlite.path: \(old.sqlitePath) -> \(new.sqlitePath)"))
            }
            if old.durability != new.durability {
                changes.append(change("storage.sqlite.durability: \(old.durability) -> \(new.durability)"))
            }
        case (let before?, let after?):
            if before.url.shown != after.url.shown {
                changes.append(change("storage.postgres.url: \(before.url.shown) -> \(after.url.shown)"))
            } else if before.url.password != after.url.password || before.url.sslMode != after.url.sslMode {
                changes.append(change("storage.postgres.url: secret changed"))
            }
            if before.timeout != after.timeout {
                let (was, now) = (before.timeout / .milliseconds(1), after.timeout / .milliseconds(1))
                changes.append(change("storage.postgres.timeout_ms: \(Int(was)) -> \(Int(now))"))
            }
            if before.poolSize != after.poolSize {
                changes.append(change("storage.postgres.pool_size: \(before.poolSize) -> \(after.poolSize)"))
            }
            if before.leaseSeconds != after.leaseSeconds {
                changes.append(change("storage.postgres.lease_s: \(before.leaseSeconds) -> \(after.leaseSeconds)"))
            }
        case (nil, let after?):
            changes.append(change("storage: sqlite \(old.sqlitePath) -> postgres \(after.url.shown)"))
        case (let before?, nil):
            changes.append(change("storage: postgres \(before.url.shown) -> sqlite \(new.sqlitePath)"))
        }
        if old.rawDays != new.rawDays {
            changes.append(change("storage.retention.raw_days: \(old.rawDays) -> \(new.rawDays)"))
        }
        return changes
    }

    /// One line per change, `applied` saying which sections the caller swaps live; every
    /// other change is marked as waiting for the next start.
    public func lines(appliedLive: Set<Section>) -> [String] {
        changes.map { change in
            change.canApplyLive && appliedLive.contains(change.section)
                ? change.text : "\(change.text) (takes effect at the next start)"
        }
    }
}
