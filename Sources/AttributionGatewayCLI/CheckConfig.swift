import ArgumentParser
import GatewayConfig
import GatewayCore
import GatewayServer

struct CheckConfig: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Check a configuration file and print what it enables.",
        discussion: "Prints every problem with its line, and exits 1 when there is any. Secrets are never printed.")

    @Argument(help: "The configuration file.")
    var file = "config.yaml"

    func run() throws {
        let configuration = try loadConfiguration(file)
        for warning in configuration.warnings { printError("warning: \(warning)") }
        print(ConfigSummary.describe(configuration))
    }
}

/// What a valid configuration enables, in words; never the value of a secret.
enum ConfigSummary {
    static func describe(_ configuration: GatewayConfiguration) -> String {
        var lines = ["\(configuration.file): valid"]
        let server = configuration.server
        lines.append("server: \(server.host):\(server.port), bodies up to \(server.maxBodyBytes) bytes")
        let storage = configuration.storage
        var stored =
            storage.postgres.map { "storage: postgres \($0.url.shown) (pool of \($0.poolSize))" }
            ?? "storage: sqlite \(storage.sqlitePath) (durability \(storage.durability))"
        if storage.rawDays > 0 { stored += "; raw payloads kept \(storage.rawDays) days" }
        if storage.recordsDays > 0 { stored += "; records kept \(storage.recordsDays) days" }
        lines.append(stored)
        let keys = configuration.auth.apiKeys
        let apps = Set(keys.map(\.appID)).sorted()
        lines.append(
            keys.isEmpty
                ? "auth: no API keys; app-facing routes accept any caller"
                : "auth: \(keys.count) API keys for apps \(apps.joined(separator: ", "))")
        let providers = configuration.providers.map(\.typeName)
        lines.append("providers: \(providers.isEmpty ? "none enabled" : providers.joined(separator: ", "))")
        let enrichers = configuration.enrichers.map(\.typeName)
        lines.append("enrichers: \(enrichers.isEmpty ? "none enabled" : enrichers.joined(separator: ", "))")
        lines.append("sinks:")
        if configuration.sinks.isEmpty { lines.append("  none") }
        for sink in configuration.sinks {
            let d = sink.delivery
            lines.append(
                "  \(sink.name) (\(sink.prepared.typeName)): \(sink.prepared.summary); batches of \(d.batchSize), "
                    + "\(d.maxAttempts) attempts\(d.paused ? ", PAUSED" : "")")
        }
        lines.append("routes:")
        if configuration.routes.isEmpty { lines.append("  none: records are stored but go to no sink") }
        for (index, route) in configuration.routes.enumerated() {
            lines.append("  \(index + 1). \(describe(route.filter)) -> \(route.sinks.joined(separator: ", "))")
        }
        return lines.joined(separator: "\n")
    }

    static func describe(_ filter: RecordFilter) -> String {
        var parts: [String] = []
        if let providers = filter.providers { parts.append("provider in [\(providers.joined(separator: ", "))]") }
        if let apps = filter.appIDs { parts.append("app_id in [\(apps.joined(separator: ", "))]") }
        if let attributed = filter.attributed { parts.append("attributed = \(attributed)") }
        if let kinds = filter.kinds { parts.append("kind in [\(kinds.map(\.rawValue).joined(separator: ", "))]") }
        if let statuses = filter.attStatuses {
            parts.append("att_status in [\(statuses.map(String.init).joined(separator: ", "))]")
        }
        if filter.trackingConsent == true { parts.append("tracking consent (att_status 3, or none before iOS 14.5)") }
        if filter.isTest == true { parts.append("test payloads only") }
        if filter.quarantined == true { parts.append("quarantined postbacks only") }
        return parts.isEmpty
            ? "all records but test payloads and quarantined postbacks" : parts.joined(separator: " and ")
    }
}
