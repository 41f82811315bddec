import Foundation
import GatewayConfig
import GatewayCore
import Logging
import UnixSignals

extension GatewayHTTP {
    /// The sections a reload swaps while the gateway serves. A change anywhere else takes
    /// effect at the next start, and `check-config --diff` marks it so.
    public static let reloadedLive: Set<ConfigurationDiff.Section> = [.auth]

    /// Replaces `auth.api_keys` with `load()`'s on every `SIGHUP`, so keys rotate without a
    /// restart: add the new key, reload, move the clients, remove the old key, reload.
    /// Only the keys are applied; every other setting takes effect at the next start. A
    /// file that no longer checks out changes nothing, and the log says why.
    static func reloadKeysOnHangup(
        gateway: Gateway, load: @escaping @Sendable () throws -> GatewayConfiguration
    ) async {
        for await _ in await UnixSignalsSequence(trapping: .sighup) {
            await waitUntilSettled(gateway.configuration.file)
            reloadKeys(gateway: gateway, load: load)
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

    /// Where each issue is, not what it says: a typo such as `key "…"` (no colon) makes
    /// the key itself part of the message, and the log is no place for it.
    /// `check-config` prints the messages to whoever runs it.
    static func issuePositions(_ error: any Error) -> String {
        guard let error = error as? ConfigError else { return String(reflecting: type(of: error)) }
        return
            "\(error.issues.map(\.position).joined(separator: ", ")) (attribution-gateway check-config FILE says what is wrong)"
    }

    static func reloadKeys(gateway: Gateway, load: () throws -> GatewayConfiguration) {
        let logger = gateway.logger
        let keys: [AuthSettings.Key]
        let reread: GatewayConfiguration
        do {
            reread = try load()
            keys = reread.auth.apiKeys
        } catch {
            logger.error(
                "configuration reload refused; the API keys in use are unchanged",
                metadata: ["issues": "\(issuePositions(error))"])
            return
        }
        let before = gateway.keyring.keys
        // An empty or half-written file (an editor saving in place) has no keys: read as
        // "no authentication", one HUP would open every route. Turning it off takes a restart.
        if keys.isEmpty && !before.isEmpty {
            logger.error(
                """
                configuration reload refused: it has no auth.api_keys, and turning authentication off takes a \
                restart; the API keys in use are unchanged
                """)
            return
        }
        // A file cut short while being saved in place can still check out: without its
        // last sections, and with only the first of its keys, it revoked keys in use. Such
        // a file lacks what the server runs with; a real change of those takes a restart
        // anyway, so a reload never needs to drop one.
        let lost = Self.partsLost(running: gateway.configuration, reread: reread)
        if !lost.isEmpty {
            logger.error(
                """
                configuration reload refused: the file no longer has what the server runs with (a file cut short \
                while being saved?); such changes take a restart; the API keys in use are unchanged
                """,
                metadata: ["missing": "\(lost.joined(separator: ", "))"])
            return
        }
        gateway.keyring.replace(with: keys)
        // Counts and app ids only: neither keys nor their digests go to the log.
        func held(_ keys: [AuthSettings.Key]) -> Set<[UInt8]> {
            Set(keys.map { Array($0.appID.utf8) + [0] + $0.sha256 })
        }
        logger.info(
            "auth.api_keys reloaded; other settings apply at the next start",
            metadata: [
                "keys": "\(keys.count)", "added": "\(held(keys).subtracting(held(before)).count)",
                "removed": "\(held(before).subtracting(held(keys)).count)",
                "apps": "\(Set(keys.map(\.appID)).sorted().joined(separator: ","))",
            ])
        if before.isEmpty && !keys.isEmpty {
            logger.warning("auth.api_keys is no longer empty: the app-facing routes now need a key")
        }
    }
}
