import Foundation
import GatewayConfig
import GatewayCore
import Logging
import Synchronization
import UnixSignals

extension GatewayHTTP {
    /// The sections a reload swaps while the gateway serves. What a reload cannot take
    /// (the listen address and the other server settings, the store) is logged as taking
    /// effect at the next start, and `check-config --diff` marks it so.
    public static let reloadedLive: Set<ConfigurationDiff.Section> = [
        .sinks, .providers, .enrichers, .routes, .auth, .rateLimits, .server,
    ]

    /// Reloads on every `SIGHUP` (see ``ConfigReloader/reload()``).
    static func reloadOnHangup(_ reloader: ConfigReloader) async {
        for await _ in await UnixSignalsSequence(trapping: .sighup) {
            await waitUntilSettled(reloader.file)
            await reloader.reload()
        }
    }

    /// Waits until the file has not changed for a second (five at most): a HUP sent by the
    /// script that is still writing the file read it half written.
    static func waitUntilSettled(_ path: String) async {
        for _ in 0..<5 {
            guard let modified = (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date
            else { return }
            let age = Date().timeIntervalSince(modified)
            guard age < 1, age > -1 else { return }
            try? await Task.sleep(for: .milliseconds(Int64((1 - age) * 1000) + 10))
        }
    }

    /// The top-level keys of a YAML file's text (`server`, `sinks`...): the lines that
    /// start a key at the first column.
    static func topLevelKeys(_ text: String) -> Set<String> {
        var keys: Set<String> = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            guard let first = line.first, first.isLetter || first == "_", let colon = line.firstIndex(of: ":")
            else { continue }
            keys.insert(String(line[..<colon]).trimmingCharacters(in: .whitespaces))
        }
        return keys
    }
}

/// Re-reads config.yaml (on `SIGHUP`, or when `serve --watch-config` sees it change) and
/// swaps what ``GatewayHTTP/reloadedLive`` names between requests. The file is checked as
/// a whole first: a mistake anywhere changes nothing. Each reload is counted, `applied` or
/// `rejected`, and logged with what changed, and, apart, what waits for the next start.
final class ConfigReloader: Sendable {
    let gateway: Gateway
    let load: @Sendable () throws -> GatewayConfiguration
    /// How long a file that removes sinks, routes or enrichers must stay the same before
    /// the removal applies (see ``reload(from:)``).
    let removalSettle: Duration
    /// The log level of `serve`'s handlers, which `server.log_level` sets.
    let logLevel: LiveLogLevel?
    /// What the gateway runs with: the configuration it started with, with what each
    /// applied reload swapped. A change not applied stays a difference, so that every
    /// reload names it again until the next start.
    private let running: Mutex<GatewayConfiguration>
    /// The top-level keys of the file the running configuration was read from.
    private let runningSections: Mutex<Set<String>>
    /// Reloads never overlap (the signal and the watcher may ask at once).
    private let serial = PerKeySerial<Int>()

    init(
        gateway: Gateway, removalSettle: Duration = .seconds(1), logLevel: LiveLogLevel? = nil,
        load: @escaping @Sendable () throws -> GatewayConfiguration
    ) {
        self.gateway = gateway
        self.load = load
        self.removalSettle = removalSettle
        self.logLevel = logLevel
        running = Mutex(gateway.configuration)
        let text = (try? String(contentsOfFile: gateway.configuration.file, encoding: .utf8)) ?? ""
        runningSections = Mutex(GatewayHTTP.topLevelKeys(text))
    }

    var file: String { gateway.configuration.file }

    /// One reload, after any under way; returns once it is applied or refused.
    func reload() async {
        try? await serial.run(0) {
            let running = self.running.withLock { $0 }
            if let applied = await self.reload(from: running) {
                self.running.withLock { $0 = applied }
                self.gateway.metrics.configReload(result: "applied")
            } else {
                self.gateway.metrics.configReload(result: "rejected")
            }
        }
    }

    /// The configuration that runs after reloading over `running`, or nil when the file
    /// was refused (and the log says why).
    private func reload(from running: GatewayConfiguration) async -> GatewayConfiguration? {
        let logger = gateway.logger
        let version = ConfigWatcher.version(of: file)
        let sections = GatewayHTTP.topLevelKeys((try? String(contentsOfFile: file, encoding: .utf8)) ?? "")
        let reread: GatewayConfiguration
        do {
            reread = try load()
        } catch {
            // Where each issue is, and what it is unless it may quote a key; `check-config`
            // prints everything.
            let issues = (error as? ConfigError)?.issues.map(\.descriptionForLog) ?? ["\(type(of: error))"]
            logger.error(
                "configuration reload refused; nothing changed",
                metadata: ["issues": "\(issues.joined(separator: "; "))"])
            return nil
        }
        // An empty or half-written file (an editor saving in place) has no keys: read as
        // "no authentication", one reload would open every route. Turning it off takes a restart.
        if reread.auth.apiKeys.isEmpty && !running.auth.apiKeys.isEmpty {
            logger.error(
                """
                configuration reload refused: it has no auth.api_keys, and turning authentication off takes a \
                restart; nothing changed
                """)
            return nil
        }
        let target = GatewayHTTP.liveTarget(from: running, to: reread)
        // A file cut short while being saved in place can still check out, without its
        // last sections, or the end of its last one: read as meant, it would remove sinks
        // and routes. A removal is applied only when the file has every section the
        // running one had (to empty one, keep its key), and stayed the same a while after
        // it was read: one still being written has changed by then (and is read again at
        // its next change or signal). A deliberate removal is logged.
        let removed = GatewayHTTP.removals(from: running, to: target)
        let missing = runningSections.withLock { $0 }.subtracting(sections)
        if !removed.isEmpty && !missing.isEmpty {
            logger.error(
                """
                configuration reload refused: the file no longer has what the server runs with (a file cut short \
                while being saved?); to remove every part of a section, keep its key; nothing changed
                """,
                metadata: [
                    "missing": "\(removed.joined(separator: ", "))",
                    "sections": "\(missing.sorted().joined(separator: ", "))",
                ])
            return nil
        }
        if !removed.isEmpty {
            try? await Task.sleep(for: removalSettle)
            guard let version, ConfigWatcher.version(of: file)?.digest == version.digest else {
                logger.error(
                    """
                    configuration reload refused: it removes parts of the running configuration and the file \
                    changed while it was read (still being written?); nothing changed
                    """,
                    metadata: ["removed": "\(removed.joined(separator: ", "))"])
                return nil
            }
        }
        let diff = ConfigurationDiff(from: running, to: reread)
        do {
            try await gateway.swapLive(from: running, to: target)
        } catch {
            logger.error(
                "configuration reload refused: a sink, provider or enricher could not be built; nothing changed",
                metadata: ["error": "\(error)"])
            return nil
        }
        runningSections.withLock { $0 = sections }
        gateway.keyring.replace(with: reread.auth.apiKeys)
        gateway.operatorKeys.replace(with: reread.auth)
        gateway.rateLimits.replace(with: reread.server.rateLimits)
        if let level = Logger.Level(rawValue: reread.server.logLevel) { logLevel?.set(level) }
        let lines = diff.lines(appliedLive: GatewayHTTP.reloadedLive)
        logger.info(
            diff.isEmpty ? "configuration reloaded: no changes" : "configuration reloaded",
            metadata: diff.isEmpty ? [:] : ["changes": "\(lines.joined(separator: "; "))"])
        if !removed.isEmpty {
            logger.warning(
                """
                configuration reload removed parts: a removed sink's worker stops after its batch, and its outbox \
                rows wait until a configuration names it again; a disabled provider's routes answer 404
                """,
                metadata: ["removed": "\(removed.joined(separator: ", "))"])
        }
        let waiting = diff.changes.filter { !($0.canApplyLive && GatewayHTTP.reloadedLive.contains($0.section)) }
        if !waiting.isEmpty {
            logger.warning(
                "configuration changes not applied live: they take effect at the next start",
                metadata: ["changes": "\(waiting.map(\.text).joined(separator: "; "))"])
        }
        if reread.providers.isEmpty && !running.providers.isEmpty {
            logger.warning("no provider is enabled: no ingest route is served; list them under providers:")
        }
        if running.auth.apiKeys.isEmpty && !reread.auth.apiKeys.isEmpty {
            logger.warning("auth.api_keys is no longer empty: the app-facing routes now need a key")
        }
        return target
    }
}
