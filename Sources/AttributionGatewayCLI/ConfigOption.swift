import ArgumentParser
import Foundation
import GatewayConfig
import GatewayCore
import GatewayServer

/// Loads config.yaml or exits with its issues, one per line, on stderr.
func loadConfiguration(_ path: String) throws -> GatewayConfiguration {
    do {
        return try ConfigLoader.load(path: path, registry: .builtIn)
    } catch {
        printError(error.description)
        throw ExitCode(1)
    }
}

func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}
