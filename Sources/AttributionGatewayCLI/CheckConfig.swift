import ArgumentParser
import GatewayConfig
import GatewayCore
import GatewayServer

struct CheckConfig: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Check a configuration file and print what it enables.",
        discussion: """
            Prints every problem with its line, and exits 1 when there is any. Secrets are never printed. \
            With --diff OLD NEW, checks both files and prints what a reload (SIGHUP, serve --watch-config) from \
            OLD to NEW would change, one line per change, marking what takes effect at the next start; exits 0 \
            when both files are valid, whatever they differ in.
            """)

    @Flag(help: "Print what a reload from the first file to the second would change.")
    var diff = false

    @Argument(help: "The configuration file (default config.yaml); with --diff, OLD and NEW.")
    var files: [String] = []

    @Option(name: .shortAndLong, help: "The configuration file, as every other command names it.")
    var config: String?

    func validate() throws {
        if diff, files.count != 2 { throw ValidationError("--diff takes two files: OLD NEW") }
        if diff, config != nil { throw ValidationError("--diff takes its two files as arguments, not --config") }
        if !diff, files.count + (config == nil ? 0 : 1) > 1 {
            throw ValidationError("name one file, or two with --diff")
        }
    }

    func run() throws {
        guard diff else {
            let configuration = try loadConfiguration(config ?? files.first ?? ConfigLoader.defaultFile)
            for warning in configuration.warnings { printError("warning: \(warning)") }
            print(ConfigSummary.describe(configuration))
            return
        }
        // Both files are checked, so that one run names the problems of each.
        var loaded: [GatewayConfiguration] = []
        var failed = false
        for file in files {
            do {
                loaded.append(try loadConfiguration(file))
            } catch {
                failed = true
            }
        }
        guard !failed, let old = loaded.first, let new = loaded.last else { throw ExitCode(1) }
        for warning in new.warnings { printError("warning: \(warning)") }
        print(ConfigSummary.describe(ConfigurationDiff(from: old, to: new), from: old.file, to: new.file))
    }
}

/// What a valid configuration enables, in words; never the value of a secret.
enum ConfigSummary {
    /// A reload's changes, one a line, after a line naming the files and counting them.
    static func describe(_ diff: ConfigurationDiff, from old: String, to new: String) -> String {
        let count = diff.changes.count
        let heading = "\(old) -> \(new): " + (count == 0 ? "no changes" : count == 1 ? "1 change" : "\(count) changes")
        return ([heading] + diff.lines(appliedLive: GatewayHTTP.reloadedLive)).joined(separator: "\n")
    }

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
        let operators = configuration.auth.operatorKeys.count
        lines.append(
            (keys.isEmpty
                ? "auth: no API keys; app-facing routes accept any caller"
                : "auth: \(keys.count) API keys for apps \(apps.joined(separator: ", "))")
                + (operators == 0
                    ? "; no operator keys: the dashboard and reports are closed"
                    : "; \(operators) operator key\(operators == 1 ? "" : "s")"))
        let providers = configuration.providers.map(\.typeName)
        lines.append("providers: \(providers.isEmpty ? "none enabled" : providers.joined(separator: ", "))")
        let enrichers = configuration.enrichers.map(\.typeName)
        lines.append("enrichers: \(enrichers.isEmpty ? "none enabled" : enrichers.joined(separator: ", "))")
        lines.append("sinks:")
        if configuration.sinks.isEmpty { lines.append("  none") }
        for sink in configuration.sinks {
            let d = sink.delivery
            // As the sink's worker takes them: `batch_size`, capped by the sink's own limit.
            let batch = min(d.batchSize, sink.prepared.maxBatchSize ?? .max)
            lines.append(
                "  \(sink.name) (\(sink.prepared.typeName)): \(sink.prepared.summary); batches of up to \(batch), "
                    + "\(d.maxAttempts) attempts\(d.paused ? ", PAUSED" : "")")
        }
        lines.append("routes:")
        if configuration.routes.isEmpty { lines.append("  none: records are stored but go to no sink") }
        for (index, route) in configuration.routes.enumerated() {
            lines.append("  \(index + 1). \(route.filter.summary) -> \(route.sinks.joined(separator: ", "))")
        }
        return lines.joined(separator: "\n")
    }
}
