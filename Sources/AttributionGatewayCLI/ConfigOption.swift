import ArgumentParser
import Foundation
import GatewayConfig
import GatewayCore
import GatewayPostgres
import GatewayServer
import GatewayStorage

/// Loads config.yaml or exits with its issues, one per line, on stderr. With
/// `forLog` (`serve`, whose stderr is a log), an issue under `auth` or naming a key that is
/// no plain name is shown by position only: a typo such as `key "…"` (no colon) makes the
/// key itself part of the message. `check-config` shows everything.
func loadConfiguration(_ path: String, forLog: Bool = false, enrichers: Bool = true) throws -> GatewayConfiguration {
    do {
        return try ConfigLoader.load(path: path, registry: .builtIn, enrichers: enrichers)
    } catch {
        printError(forLog ? error.issues.map(\.descriptionForLog).joined(separator: "\n") : error.description)
        throw ExitCode(1)
    }
}

func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// The store of a command that reads what a gateway stored (`report`, `dlq`, `replay`):
/// a missing SQLite file is an error, not an empty store made on the spot, since a config
/// pointing at the wrong place would otherwise read as "nothing recorded yet".
func openExistingStore(
    _ configuration: GatewayConfiguration, upgrade: SQLiteStore.SchemaUpgrade = .unlessServed
) async throws -> any AttributionStore {
    if configuration.storage.postgres == nil {
        let path = configuration.storage.sqlitePath
        guard FileManager.default.fileExists(atPath: path) else {
            printError(
                "no store at \(path) (storage.sqlite.path): check the config, or start the gateway once to create it")
            throw ExitCode(1)
        }
    }
    do {
        return try await Gateway.openStore(configuration, upgrade: upgrade, onWait: printError)
    } catch let refusal as StoreNotReady {
        printError(refusal.description)
        throw ExitCode(1)
    }
}

/// Runs `body` on the store a gateway wrote (see ``openExistingStore(_:upgrade:)``); SQLite's
/// failures on the way (a damaged page) name the store and its key, and exit 1.
func withExistingStore<T>(
    _ configuration: GatewayConfiguration, upgrade: SQLiteStore.SchemaUpgrade = .unlessServed,
    _ body: (any AttributionStore) async throws -> T
) async throws -> T {
    let store = try await openExistingStore(configuration, upgrade: upgrade)
    do {
        return try await body(store)
    } catch {
        guard let named = StoreOpenError.using(configuration.storage.sqlitePath, error) else { throw error }
        printError(named.description)
        throw ExitCode(1)
    }
}
