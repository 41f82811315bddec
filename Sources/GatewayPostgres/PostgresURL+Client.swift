import GatewayCore
import PostgresNIO

extension PostgresURL {
    /// postgres-nio's configuration for a pool of at most `poolSize` connections.
    public func clientConfiguration(poolSize: Int) -> PostgresClient.Configuration {
        let tls: PostgresClient.Configuration.TLS =
            switch tlsContext {
            case (let context, let required)?: required ? .require(context) : .prefer(context)
            case nil: .disable
            }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: tls)
        configuration.options.maximumConnections = poolSize
        configuration.options.minimumConnections = 0
        configuration.options.connectTimeout = .seconds(5)
        return configuration
    }

    /// What `sslmode` asks of TLS, as libpq reads it, and whether a connection without it
    /// is refused; nil for none (`disable`, `allow`).
    var tlsContext: (configuration: TLSConfiguration, required: Bool)? {
        var context = TLSConfiguration.makeClientConfiguration()
        switch sslMode {
        case "prefer", "require":
            // libpq's `require` encrypts without checking the certificate.
            context.certificateVerification = .none
            return (context, sslMode == "require")
        case "verify-ca":
            context.certificateVerification = .noHostnameVerification
            return (context, true)
        case "verify-full":
            return (context, true)
        default:
            return nil
        }
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
            if let (context, required) = tlsContext {
                let ssl = try NIOSSLContext(configuration: context)
                configuration.tls = required ? .require(ssl) : .prefer(ssl)
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
