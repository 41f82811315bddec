import Foundation
import GatewayConfig
import GatewayCore
import Logging
import Synchronization
import UnixSignals

extension GatewayHTTP {
    /// The sections a reload swaps while the gateway serves. A change anywhere else is
    /// logged as taking effect at the next start, and `check-config --diff` marks it so.
    public static let reloadedLive: Set<ConfigurationDiff.Section> = [.auth, .rateLimits]

    /// Reloads on every `SIGHUP` (see ``ConfigReloader/reload()``).
    static func reloadOnHangup(_ reloader: ConfigReloader) async {
        for await _ in await UnixSignalsSequence(trapping: .sighup) {
            await waitUntilSettled(reloader.file)
            reloader.reload()
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

    /// The providers, enrichers, sinks and routes of the running configuration that the
    /// file re-read lacks, by name (none is secret).
    static func partsLost(running: GatewayConfiguration, reread: GatewayConfiguration) -> [String] {
        func missing(_ kind: String, _ before: [String], _ after: [String]) -> [String] {
            Set(before).subtracting(after).sorted().map { "\(kind) \($0)" }
        }
        var lost = missing("provider", running.providers.map(\.typeName), reread.providers.map(\.typeName))
        lost += missing("enricher", running.enrichers.map(\.typeName), reread.enrichers.map(\.typeName))
        lost += missing("sink", running.sinks.map(\.name), reread.sinks.map(\.name))
        if reread.routes.count < running.routes.count {
            lost.append("\(running.routes.count - reread.routes.count) of \(running.routes.count) routes")
        }
        return lost
    }
}

/// Re-reads config.yaml (on `SIGHUP`, or when `serve --watch-config` sees it change) and
/// swaps what ``GatewayHTTP/reloadedLive`` names between requests. The file is checked as
/// a whole first: a mistake anywhere changes nothing. Each reload is counted, `applied` or
/// `rejected`, and logged with what changed, and, apart, what waits for the next start.
final class ConfigReloader: Sendable {
    let gateway: Gateway
    let load: @Sendable () throws -> GatewayConfiguration
    /// What the gateway runs with: the configuration it started with, with the sections
    /// each applied reload swapped. A change not applied stays a difference, so that every
    /// reload names it again until the next start.
    private let running: Mutex<GatewayConfiguration>

    init(gateway: Gateway, load: @escaping @Sendable () throws -> GatewayConfiguration) {
        self.gateway = gateway
        self.load = load
        running = Mutex(gateway.configuration)
    }

    var file: String { gateway.configuration.file }

    /// One reload; reloads never overlap (the signal and the watcher may ask at once).
    func reload() {
        running.withLock { running in
            if let applied = reload(from: running) {
                running = applied
                gateway.metrics.configReload(result: "applied")
            } else {
                gateway.metrics.configReload(result: "rejected")
            }
        }
    }

    /// The configuration that runs after reloading over `running`, or nil when the file
    /// was refused (and the log says why).
    private func reload(from running: GatewayConfiguration) -> GatewayConfiguration? {
        let logger = gateway.logger
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
        // A file cut short while being saved in place can still check out: without its
        // last sections, and with only the first of its keys, it revoked keys in use. Such
        // a file lacks what the server runs with; a real change of those takes a restart
        // anyway, so a reload never needs to drop one.
        let lost = GatewayHTTP.partsLost(running: running, reread: reread)
        if !lost.isEmpty {
            logger.error(
                """
                configuration reload refused: the file no longer has what the server runs with (a file cut short \
                while being saved?); such changes take a restart; nothing changed
                """,
                metadata: ["missing": "\(lost.joined(separator: ", "))"])
            return nil
        }
        let diff = ConfigurationDiff(from: running, to: reread)
        var applied = running
        gateway.keyring.replace(with: reread.auth.apiKeys)
        gateway.operatorKeys.replace(with: reread.auth)
        applied.auth = reread.auth
        gateway.rateLimits.replace(with: reread.server.rateLimits)
        applied.server.rateLimits = reread.server.rateLimits
        let lines = diff.lines(appliedLive: GatewayHTTP.reloadedLive)
        logger.info(
            diff.isEmpty ? "configuration reloaded: no changes" : "configuration reloaded",
            metadata: diff.isEmpty ? [:] : ["changes": "\(lines.joined(separator: "; "))"])
        let waiting = diff.changes.filter { !($0.canApplyLive && GatewayHTTP.reloadedLive.contains($0.section)) }
        if !waiting.isEmpty {
            logger.warning(
                "configuration changes not applied live: they take effect at the next start",
                metadata: ["changes": "\(waiting.map(\.text).joined(separator: "; "))"])
        }
        if running.auth.apiKeys.isEmpty && !reread.auth.apiKeys.isEmpty {
            logger.warning("auth.api_keys is no longer empty: the app-facing routes now need a key")
        }
        return applied
    }
}
