import GatewayConfig
import Logging
import UnixSignals

extension GatewayHTTP {
    /// Replaces `auth.api_keys` with `load()`'s on every `SIGHUP`, so keys rotate without a
    /// restart: add the new key, reload, move the clients, remove the old key, reload.
    /// Only the keys are applied; every other setting takes effect at the next start. A
    /// file that no longer checks out changes nothing, and the log says why.
    static func reloadKeysOnHangup(
        gateway: Gateway, load: @escaping @Sendable () throws -> [AuthSettings.Key]
    ) async {
        for await _ in await UnixSignalsSequence(trapping: .sighup) {
            reloadKeys(gateway: gateway, load: load)
        }
    }

    static func reloadKeys(gateway: Gateway, load: () throws -> [AuthSettings.Key]) {
        let logger = gateway.logger
        let keys: [AuthSettings.Key]
        do {
            keys = try load()
        } catch {
            // The issues name paths and lines, as `check-config` prints them.
            logger.error(
                "configuration reload refused; the API keys in use are unchanged", metadata: ["issues": "\(error)"])
            return
        }
        let before = gateway.keyring.keys
        gateway.keyring.replace(with: keys)
        // Counts and app ids only: neither keys nor their digests go to the log.
        func held(_ keys: [AuthSettings.Key]) -> Set<[UInt8]> { Set(keys.map { Array($0.appID.utf8) + [0] + $0.sha256 }) }
        logger.info(
            "auth.api_keys reloaded; other settings apply at the next start",
            metadata: [
                "keys": "\(keys.count)", "added": "\(held(keys).subtracting(held(before)).count)",
                "removed": "\(held(before).subtracting(held(keys)).count)",
                "apps": "\(Set(keys.map(\.appID)).sorted().joined(separator: ","))",
            ])
        if before.isEmpty != keys.isEmpty {
            logger.warning(
                keys.isEmpty
                    ? "auth.api_keys is now empty: the app-facing routes accept any caller"
                    : "auth.api_keys is no longer empty: the app-facing routes now need a key")
        }
    }
}
