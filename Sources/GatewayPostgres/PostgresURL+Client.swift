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

extension PostgresURL {
    /// The server's own answer to one connection made outside the pool, or nil once one
    /// is made: the pool reports only that it gave up ("circuit breaker tripped") when the
    /// server refused a connection or the password, after retrying for about a minute.
    public func connectionFailure(logger: Logger) async -> String? {
        var configuration = PostgresConnection.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: .disable)
        do {
            switch sslMode {
            case "prefer", "require", "verify-ca", "verify-full":
                var context = TLSConfiguration.makeClientConfiguration()
                if sslMode == "prefer" || sslMode == "require" { context.certificateVerification = .none }
                if sslMode == "verify-ca" { context.certificateVerification = .noHostnameVerification }
                let ssl = try NIOSSLContext(configuration: context)
                configuration.tls = sslMode == "prefer" ? .prefer(ssl) : .require(ssl)
            default:
                break
            }
            configuration.options.connectTimeout = .seconds(5)
            let connection = try await PostgresConnection.connect(
                on: MultiThreadedEventLoopGroup.singleton.next(), configuration: configuration, id: 0, logger: logger
            ).get()
            try? await connection.close()
            return nil
        } catch {
            return PostgresStore.describe(error)
        }
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
