import Foundation
import GatewayCore

/// Reads config.yaml into a ``GatewayConfiguration``, reporting every problem with its
/// YAML path and line (unknown keys, wrong types, missing settings, routes to sinks that
/// do not exist) rather than the first one.
public enum ConfigLoader {
    public static let defaultFile = "config.yaml"

    /// Loads and checks the file at `path`. Without `enrichers`, the `enrichers:` section
    /// is left unread: the commands that never enrich (`dlq`, `report`, `backup`, `replay`,
    /// `keywords import`) then need none of its secrets (the Apple Ads private key) in
    /// their environment; `serve`, `import` and `check-config` read it.
    public static func load(
        path: String, environment: [String: String] = ProcessInfo.processInfo.environment,
        registry: PluginRegistry, enrichers: Bool = true
    ) throws(ConfigError) -> GatewayConfiguration {
        let text: String
        if FileManager.default.isFolder(atPath: path) {
            throw ConfigError(issues: [
                ConfigIssue(file: path, path: "", line: 0, column: 0, message: "a folder, not a configuration file")
            ])
        }
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ConfigError(issues: [
                ConfigIssue(
                    file: path, path: "", line: 0, column: 0,
                    message: "cannot read the file: \(error.localizedDescription)")
            ])
        }
        return try parse(yaml: text, file: path, environment: environment, registry: registry, enrichers: enrichers)
    }

    /// Checks YAML text; `file` names it in messages.
    public static func parse(
        yaml: String, file: String, environment: [String: String], registry: PluginRegistry,
        enrichers readsEnrichers: Bool = true
    ) throws(ConfigError) -> GatewayConfiguration {
        try parse(
            yaml: yaml, file: file, environment: environment, registry: registry, enrichers: readsEnrichers,
            keysAsked: { _ in })
    }

    /// As the other `parse`, telling `keysAsked` the path of every key the loader asked for.
    public static func parse(
        yaml: String, file: String, environment: [String: String], registry: PluginRegistry,
        enrichers readsEnrichers: Bool = true, keysAsked: (Set<String>) -> Void
    ) throws(ConfigError) -> GatewayConfiguration {
        let root = try YAMLConfigNode.parse(yaml, file: file)
        let diagnostics = ConfigDiagnostics(file: file) { path in
            do {
                let text = try String(contentsOfFile: path, encoding: .utf8)
                return .success(try YAMLConfigNode.parse(text, file: path))
            } catch let error as ConfigError {
                return .failure(error)
            } catch {
                return .failure(
                    ConfigError(issues: [
                        ConfigIssue(
                            file: path, path: "", line: 0, column: 0,
                            message: "cannot read the file: \(error.localizedDescription)")
                    ]))
            }
        }
        let reader = ConfigReader(node: root, path: "", diagnostics: diagnostics, environment: environment)

        let server = readServer(reader.child("server"))
        let storage = readStorage(reader.child("storage"), root: reader)
        let auth = readAuth(reader.child("auth"))
        // Only backend keys get a bucket (an app's key is public): without one, the limit
        // the operator meant to set limits nothing.
        if server.rateLimits.perKey != nil, !auth.apiKeys.contains(where: { $0.scope == .backend }) {
            diagnostics.warn(
                "limits nothing: only keys of `scope: backend` in auth.api_keys get a bucket, and there are none",
                path: "server.rate_limits.per_key",
                at: reader.child("server")?.child("rate_limits")?.node("per_key"))
        }
        let providers = readProviders(reader.child("providers"), registry: registry)
        let enrichersSection = reader.child("enrichers")
        let enrichers = readsEnrichers ? readEnrichers(enrichersSection, registry: registry) : []
        var sinks = readSinks(reader.child("sinks"), storage: storage, registry: registry)
        // Routes are checked against every name under `sinks:`, also those with errors of
        // their own: those are reported there, not again as missing.
        var routes = readRoutes(
            reader, sinks: sinks.map(\.name), declared: reader.child("sinks")?.keys ?? [], registry: registry)
        // Providers' own destinations (the s2s vendors) come after `routes:` and are not
        // part of "every sink" when `routes:` is absent. Their names contain a '.', which
        // names under `sinks:` cannot, so they never clash.
        for provided in providers.flatMap(\.sinks) {
            sinks.append(ConfiguredSink(prepared: provided.prepared, delivery: provided.delivery))
            routes.append(Route(sinks: [provided.prepared.name], filter: provided.filter))
        }
        // Top-level `x-` keys hold what anchors point at, as in Compose files: no section
        // reads them, and none refuses them.
        for key in reader.keys where key.hasPrefix("x-") { _ = reader.node(key) }
        reader.finish()
        keysAsked(diagnostics.keysAsked)

        if !diagnostics.issues.isEmpty { throw ConfigError(issues: diagnostics.issues) }
        return GatewayConfiguration(
            file: file, server: server, storage: storage, auth: auth, providers: providers, enrichers: enrichers,
            sinks: sinks, routes: routes, warnings: diagnostics.warnings,
            pluginSettings: PluginSettings.read(root, environment: environment, files: diagnostics.filesNamed))
    }

    static func readServer(_ reader: ConfigReader?) -> ServerSettings {
        var settings = ServerSettings()
        guard let reader else { return settings }
        if let host = reader.string("host") { settings.host = host }
        if let port = reader.int("port", in: 0...65535) { settings.port = port }
        if let bytes = reader.int("max_body_bytes", in: 1024...(64 << 20)) { settings.maxBodyBytes = bytes }
        if let noop = reader.bool("noop_route") { settings.noopRoute = noop }
        if let level = reader.choice(
            "log_level", ["trace", "debug", "info", "notice", "warning", "error", "critical"])
        {
            settings.logLevel = level
        }
        if let format = reader.choice("log_format", ["json", "text"]) { settings.logFormat = format }
        if let accessLog = reader.bool("access_log") { settings.accessLog = accessLog }
        if let age = reader.int("ready_max_outbox_age_s", in: 0...(30 * 86_400)) { settings.readyMaxOutboxAge = age }
        if let ms = reader.int("idle_timeout_ms", in: 100...3_600_000) { settings.idleTimeoutMs = ms }
        if let ms = reader.int("body_timeout_ms", in: 100...3_600_000) { settings.bodyTimeoutMs = ms }
        if let count = reader.int("max_connections", in: 1...1_000_000) { settings.maxConnections = count }
        if let count = reader.int("max_connections_per_ip", in: 0...1_000_000) { settings.maxConnectionsPerIP = count }
        if let ms = reader.int("request_head_timeout_ms", in: 100...3_600_000) { settings.requestHeadTimeoutMs = ms }
        if let seconds = reader.int("shutdown_delay_s", in: 0...600) { settings.shutdownDelaySeconds = seconds }
        if let seconds = reader.int("shutdown_timeout_s", in: 1...3600) { settings.shutdownTimeoutSeconds = seconds }
        for text in reader.stringList("trusted_proxies") ?? [] {
            guard let network = IPNetwork(text) else {
                reader.report("`\(text)` is not an IP address or a CIDR range", key: "trusted_proxies")
                continue
            }
            // Trusting everyone, or half the internet, lets any client name its own IP and
            // escape its limit. No proxy network is wider than a /8 (IPv4) or a /7 (IPv6,
            // the size of fc00::/7), none holds every IPv4 address (`::/1` does), and no
            // provider publishes a public range wider than a /13 or a /29.
            guard !network.isWiderThanAnyProxyNetwork else {
                reader.report(
                    "`\(text)` is wider than any proxy's network and would trust clients; list the proxies' own networks",
                    key: "trusted_proxies")
                continue
            }
            settings.trustedProxies.append(network)
        }
        if let limits = reader.child("rate_limits") {
            /// The bucket under `key`: nil when absent, or when `per_second` is `0`, which
            /// only a limit on by default takes (`offable`), to turn it off.
            func limit(_ key: String, offable: Bool = false) -> RateLimits.Limit?? {
                guard let limit = limits.child(key) else { return .none }
                defer { limit.finish() }
                guard let rate = limit.int("per_second", in: (offable ? 0 : 1)...1_000_000) else {
                    if !limit.has("per_second") { limit.report("is required", key: "per_second") }
                    return .none
                }
                let burst = limit.int("burst", in: 1...10_000_000) ?? rate * 2
                return rate == 0 ? .some(nil) : RateLimits.Limit(rate: Double(rate), burst: Double(burst))
            }
            settings.rateLimits.perKey = limit("per_key") ?? nil
            settings.rateLimits.perIP = limit("per_ip") ?? nil
            if let open = limit("open_routes_per_ip", offable: true) { settings.rateLimits.openRoutesPerIP = open }
            limits.finish()
        }
        reader.finish()
        return settings
    }

    /// Paths are relative to the config file, as every file it names is: relative to the
    /// working directory, `import` or `report` run from another folder read and filled a
    /// store of their own, and `serve` under systemd (working directory `/`) started empty.
    static func readStorage(_ reader: ConfigReader?, root: ConfigReader) -> StorageSettings {
        var storage = StorageSettings()
        storage.sqlitePath = root.resolvedPath(storage.sqlitePath)
        guard let reader else { return storage }
        if let sqlite = reader.child("sqlite") {
            if let path = sqlite.filePath("path") { storage.sqlitePath = path }
            if let durability = sqlite.choice("durability", ["full", "normal"]) { storage.durability = durability }
            sqlite.finish()
        }
        if let postgres = reader.child("postgres") {
            if reader.has("sqlite") {
                reader.report("name one store: sqlite or postgres, not both", key: "postgres")
            }
            // Every key is read whatever the URL: one that cannot be read must not make the
            // others "unknown" nor leave their values unchecked.
            let url = postgres.requiredString("url")
            let poolSize = postgres.int("pool_size", in: 1...1000)
            let lease = postgres.int("lease_s", in: 5...86400)
            let timeout = postgres.int("timeout_ms", in: 1000...600_000)
            if let url {
                do {
                    var settings = PostgresStorageSettings(url: try PostgresURL(url))
                    if let poolSize { settings.poolSize = poolSize }
                    if let lease { settings.leaseSeconds = lease }
                    if let timeout { settings.timeout = .milliseconds(timeout) }
                    storage.postgres = settings
                } catch {
                    postgres.report("\(error)", key: "url")
                }
            }
            postgres.finish()
        }
        if let retention = reader.child("retention") {
            if let days = retention.int("raw_days", in: 0...36_500) { storage.rawDays = days }
            if let days = retention.int("records_days", in: 0...36_500) { storage.recordsDays = days }
            retention.finish()
        }
        reader.finish()
        return storage
    }

    static func readAuth(_ reader: ConfigReader?) -> AuthSettings {
        var settings = AuthSettings()
        guard let reader else { return settings }
        var scopes: [[UInt8]: APIKeyScope] = [:]
        for entry in reader.list("api_keys") ?? [] {
            let appID = entry.requiredString("app_id")
            var digest: [UInt8]?
            if entry.has("key_sha256") {
                if let hex = entry.string("key_sha256") {
                    digest = SHA256Hex.decode(hex)
                    if digest == nil {
                        entry.report("must be 64 hex digits (the SHA-256 of the key)", key: "key_sha256")
                    }
                }
            } else if let key = entry.requiredString("key") {
                if let problem = keyProblem(key) {
                    entry.report(problem, key: "key")
                } else {
                    digest = SHA256Hex.digest(key)
                }
            }
            let scope = readScope(entry)
            // A key inside one app is public for all: it must not be a backend key elsewhere.
            if let digest, let scope, let other = scopes[digest], other != scope {
                entry.report("this key is listed with scope \(other.rawValue) too; give each scope its own key")
            }
            entry.finish()
            if let appID, let digest, let scope {
                scopes[digest] = scope
                settings.apiKeys.append(.init(appID: appID, sha256: digest, scope: scope))
            }
        }
        settings.operatorKeys = readOperatorKeys(reader, apiKeys: settings.apiKeys)
        reader.finish()
        return settings
    }

    /// Why `key` cannot be a key, never quoting it: too short to resist guessing, or with
    /// white space at an end. A request's key is trimmed before it is compared, so such a
    /// key could never match (a YAML `|` block or a file read ends in a newline).
    static func keyProblem(_ key: String) -> String? {
        if key.utf8.count < 16 { return "must be at least 16 characters" }
        if key.trimmingWhitespace() != key { return "must not begin or end with white space" }
        return nil
    }

    /// `operator_keys`: plain keys, as digests. An empty entry (`${OPERATOR_KEY:-}` unset) is
    /// left out, so that one config serves with and without the operator routes. Messages
    /// give the entry's index, never the key.
    static func readOperatorKeys(_ reader: ConfigReader, apiKeys: [AuthSettings.Key]) -> [[UInt8]] {
        var digests: [[UInt8]] = []
        for (index, key) in (reader.stringList("operator_keys") ?? []).enumerated() where !key.isEmpty {
            let entry = "entry \(index + 1)"
            if let problem = keyProblem(key) {
                reader.report("\(entry) \(problem)", key: "operator_keys")
            } else if apiKeys.contains(where: { $0.sha256 == SHA256Hex.digest(key) }) {
                // An app's key is readable out of the app: it must never open the reports.
                reader.report(
                    "\(entry) is also listed in auth.api_keys; give operators a key of their own", key: "operator_keys")
            } else if !digests.contains(SHA256Hex.digest(key)) {
                digests.append(SHA256Hex.digest(key))
            }
        }
        return digests
    }

    /// `scope`, default `app`. `shipped_in_app` is its older spelling: `true` is `app`, and
    /// `false`, which said the key is not inside the app, is `backend`.
    static func readScope(_ entry: ConfigReader) -> APIKeyScope? {
        let allowed = APIKeyScope.allCases.map(\.rawValue)
        let written = entry.has("scope") ? entry.choice("scope", allowed).flatMap(APIKeyScope.init(rawValue:)) : .app
        guard entry.has("shipped_in_app") else { return written }
        guard let shipped = entry.bool("shipped_in_app") else { return nil }
        let spelled: APIKeyScope = shipped ? .app : .backend
        if entry.has("scope"), let written, written != spelled {
            entry.report("says scope \(spelled.rawValue), but scope says \(written.rawValue)", key: "shipped_in_app")
            return nil
        }
        return spelled
    }

    static func readProviders(_ reader: ConfigReader?, registry: PluginRegistry) -> [PreparedProvider] {
        readNamedPlugins(reader, kind: "provider", available: registry.providerTypes) { name, options in
            registry.prepareProvider(type: name, reader: options)
        }
    }

    static func readEnrichers(_ reader: ConfigReader?, registry: PluginRegistry) -> [PreparedEnricher] {
        readNamedPlugins(reader, kind: "enricher", available: registry.enricherTypes) { name, options in
            registry.prepareEnricher(type: name, reader: options)
        }
    }

    /// Sections keyed by plugin name (`providers:`, `enrichers:`), each with `enabled`
    /// (default true). A disabled plugin's name is checked, its settings are not: it is
    /// disabled because its credentials (`${SINGULAR_KEY}`, a private key file) are not
    /// there yet, as in DESIGN's own sketch; `check-config` checks them once it is enabled.
    static func readNamedPlugins<Prepared>(
        _ reader: ConfigReader?, kind: String, available: [String],
        prepare: (String, ConfigReader) -> Prepared??
    ) -> [Prepared] {
        guard let reader else { return [] }
        var prepared: [Prepared] = []
        for name in reader.keys {
            guard let options = reader.child(name) else { continue }
            let enabled = options.bool("enabled") ?? true
            guard enabled || !available.contains(name) else { continue }
            guard let result = prepare(name, options) else {
                let likely = closestName(to: name, among: available).map { " (did you mean '\($0)'?)" } ?? ""
                reader.report(
                    "unknown \(kind) '\(name)'\(likely); available: \(available.joined(separator: ", "))", key: name)
                continue
            }
            options.finish()
            if let plugin = result { prepared.append(plugin) }
        }
        return prepared
    }

    static func isValidSinkName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, CharacterSet.lowercaseLetters.union(.decimalDigits).contains(first)
        else { return false }
        return name.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" || $0 == "_"
        }
    }

    static func readSinks(_ reader: ConfigReader?, storage: StorageSettings, registry: PluginRegistry)
        -> [ConfiguredSink]
    {
        guard let reader else { return [] }
        var sinks: [ConfiguredSink] = []
        for name in reader.keys {
            guard let options = reader.child(name) else {
                reader.report("a sink needs at least a type", key: name)
                continue
            }
            if !isValidSinkName(name) {
                reader.report("sink names use lowercase letters, digits, '-' and '_'", key: name)
            }
            // The type's own defaults first; `type` itself is checked below.
            let typeName = (options.node("type")?.value).flatMap { value -> String? in
                if case .scalar(let text, _) = value { return text }
                return nil
            }
            let delivery = DeliverySettings.read(options, defaults: registry.deliveryDefaults(type: typeName ?? ""))
            guard let type = options.requiredString("type") else { continue }
            let context = SinkContext(
                name: name, storagePath: storage.sqlitePath, storageURL: storage.postgres?.url,
                logger: .init(label: "config"))
            guard let result = registry.prepareSink(type: type, reader: options, context: context) else {
                let likely = closestName(to: type, among: registry.sinkTypes)
                options.report(
                    "unknown sink type '\(type)'; available: \(registry.sinkTypes.joined(separator: ", "))"
                        + (likely.map { ", did you mean '\($0)'?" } ?? ""), key: "type")
                // The rest is checked as the type it most likely meant, so that one run names
                // every mistake in the sink, not only its type.
                if let likely {
                    _ = registry.prepareSink(type: likely, reader: options, context: context)
                    options.finish()
                }
                continue
            }
            options.finish()
            if let prepared = result { sinks.append(ConfiguredSink(prepared: prepared, delivery: delivery)) }
        }
        // Each sink checks its own file or database when it starts; two of one config that
        // would make one name a table and a view are told apart here, before either starts.
        var made: [String: (sink: String, kind: String)] = [:]
        for sink in sinks {
            guard let target = sink.prepared.target else { continue }
            if let first = made[target.place], first.kind != target.kind {
                reader.report(
                    "makes \(target.place) a \(target.kind), where sink '\(first.sink)' makes it a \(first.kind); "
                        + "a file or database holds one or the other, so give both the same view setting",
                    key: sink.prepared.name)
            } else if made[target.place] == nil {
                made[target.place] = (sink.prepared.name, target.kind)
            }
        }
        return sinks
    }

    static func readRoutes(_ reader: ConfigReader, sinks: [String], declared: [String], registry: PluginRegistry)
        -> [Route]
    {
        guard let list = reader.list("routes") else {
            // No routes at all: every record goes to every sink.
            return sinks.isEmpty ? [] : [Route(sinks: sinks)]
        }
        var routes: [Route] = []
        for item in list {
            let names = item.stringList("sinks") ?? []
            if names.isEmpty { item.report("a route needs at least one sink in 'sinks'") }
            for name in names where !declared.contains(name) {
                let known = declared.isEmpty ? "no sinks are defined" : "defined: \(declared.joined(separator: ", "))"
                item.report("route names sink '\(name)', which is not under 'sinks:' (\(known))", key: "sinks")
            }
            var filter = RecordFilter()
            if let conditions = item.child("where") {
                filter.providers = conditions.stringList("provider")
                for provider in filter.providers ?? [] where !registry.providerTypes.contains(provider) {
                    conditions.report("unknown provider '\(provider)'", key: "provider")
                }
                filter.appIDs = conditions.stringList("app_id")
                filter.attributed = conditions.bool("attributed")
                filter.isTest = conditions.bool("is_test")
                filter.quarantined = conditions.bool("quarantined")
                if let statuses = conditions.stringList("att_status") {
                    filter.attStatuses = statuses.compactMap { text in
                        guard let status = Int(text), (0...3).contains(status) else {
                            conditions.report("att_status values are 0 to 3, found '\(text)'", key: "att_status")
                            return nil
                        }
                        return status
                    }
                }
                if let kinds = conditions.stringList("kind") {
                    filter.kinds = kinds.compactMap { kind in
                        guard let parsed = RecordKind(rawValue: kind), RecordKind.signals.contains(parsed) else {
                            let allowed = RecordKind.signals.map(\.rawValue).joined(separator: ", ")
                            conditions.report("unknown kind '\(kind)'; one of \(allowed)", key: "kind")
                            return nil
                        }
                        return parsed
                    }
                }
                conditions.finish()
            }
            item.finish()
            routes.append(Route(sinks: names, filter: filter))
        }
        return routes
    }
}
