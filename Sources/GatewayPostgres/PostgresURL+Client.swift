import GatewayCore
import PostgresNIO

extension PostgresURL {
    /// postgres-nio's configuration for a pool of at most `poolSize` connections.
    public func clientConfiguration(poolSize: Int) -> PostgresClient.Configuration {
        let tls: PostgresClient.Configuration.TLS
        switch sslMode {
        case "prefer", "require":
            var context = TLSConfiguration.makeClientConfiguration()
            // libpq's `require` encrypts without checking the certificate.
            context.certificateVerification = .none
            tls = sslMode == "prefer" ? .prefer(context) : .require(context)
        case "verify-ca":
            var context = TLSConfiguration.makeClientConfiguration()
            context.certificateVerification = .noHostnameVerification
            tls = .require(context)
        case "verify-full":
            tls = .require(TLSConfiguration.makeClientConfiguration())
        default:
            tls = .disable
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: tls)
        configuration.options.maximumConnections = poolSize
        configuration.options.minimumConnections = 0
        configuration.options.connectTimeout = .seconds(5)
        return configuration
    }
}

extension PostgresClient {
    /// Runs the client's pool in a task of its own, started before this returns: a
    /// connection asked for before `run()` has begun works, but logs a warning that read
    /// as a fault at every start.
    public func runInBackground() -> Task<Void, Never> {
        // Immediate: `run()` marks the client running before its first suspension.
        Task.immediate { await self.run() }
    }
}
