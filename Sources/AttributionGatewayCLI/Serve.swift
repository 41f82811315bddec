import ArgumentParser
import Foundation
import GatewayConfig
import GatewayServer
import GatewayStorage
import Logging

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the gateway: HTTP ingest and delivery to every configured sink.",
        discussion: """
            Stops gracefully on SIGTERM or SIGINT: /readyz fails for server.shutdown_delay_s, then in-flight \
            requests and sink batches finish, for at most server.shutdown_timeout_s; a second signal stops at once. \
            Undelivered records stay in the outbox. SIGHUP reloads the file: checked as a whole (a mistake \
            anywhere changes nothing), it applies keys, rate limits, sinks, routes, providers and enrichers \
            live, and server.log_level, and logs what changed; storage and the rest of server take effect \
            at the next start (check-config --diff OLD NEW shows which).
            """)

    @Option(name: .shortAndLong, help: "The configuration file.")
    var config = "config.yaml"

    @Flag(help: "Reload the configuration, as SIGHUP does, whenever the file changes (checked once a second).")
    var watchConfig = false

    func run() async throws {
        // Until the reload handler is in place (after the store opens), a SIGHUP from a
        // deploy script would end the process, its default action; ignored, it is lost.
        signal(SIGHUP, SIG_IGN)
        let configuration = try loadConfiguration(config, forLog: true)
        let level = LiveLogLevel(Logger.Level(rawValue: configuration.server.logLevel) ?? .info)
        let json = configuration.server.logFormat == "json"
        LoggingSystem.bootstrap { label in
            if json { return JSONLogHandler(label: label, level: level) }
            return TextLogHandler(label: label, level: level)
        }
        let logger = Logger(label: "attribution-gateway")
        for warning in configuration.warnings { logger.warning("\(warning)") }
        try ListenCheck.check(host: configuration.server.host, port: configuration.server.port)
        // The SQLite file has one server, which the lock makes sure of; any number of
        // replicas share a PostgreSQL database.
        let lock =
            configuration.storage.postgres == nil
            ? try ServeLock(storePath: configuration.storage.sqlitePath) { logger.notice("\($0)") } : nil
        defer { withExtendedLifetime(lock) {} }
        let gateway = try await Gateway.build(
            configuration: configuration, logger: logger, upgrade: lock.map { .whileServing($0) } ?? .unlessServed,
            onWait: { logger.notice("\($0)") })
        // The lock makes this the store's only server: any claim left is a dead one's.
        if let sqlite = gateway.sqlite {
            let released = try await sqlite.releaseClaims(now: Date())
            if released > 0 {
                logger.info("tokens a stopped gateway was resolving are due again", metadata: ["count": "\(released)"])
            }
        }
        // SIGHUP (and with --watch-config, each change): the file as it now stands, checked
        // as a whole like at the start.
        let path = config
        try await GatewayHTTP.run(gateway: gateway, watchConfig: watchConfig, logLevel: level) {
            try ConfigLoader.load(path: path, registry: .builtIn)
        }
    }
}
