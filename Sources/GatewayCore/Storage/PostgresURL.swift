import Foundation

/// `storage.postgres.url` (`postgres://user:password@host:5432/database?sslmode=require`)
/// read and checked. The PostgreSQL backend turns it into its client's configuration.
public struct PostgresURL: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var user: String
    public var password: String?
    public var database: String?
    /// `sslmode`: `disable` (the default, as for a server on loopback), `prefer`, or
    /// `require` (also `verify-ca`, `verify-full`: the certificate is checked).
    public var sslMode: String
    /// How long the gateway waits for the database to answer before it gives up: a route
    /// answers `503`, a background step tries again. Not part of the URL's text:
    /// `storage.postgres.timeout_ms` sets it.
    public var timeout: Duration = .seconds(10)

    public struct Invalid: Error, CustomStringConvertible {
        public let description: String
    }

    public static let sslModes = ["disable", "prefer", "require", "verify-ca", "verify-full"]

    public init(_ text: String) throws {
        guard let parts = URLComponents(string: text), let scheme = parts.scheme,
            ["postgres", "postgresql"].contains(scheme)
        else {
            throw Invalid(description: "must be a postgres://user:password@host:port/database URL")
        }
        guard let host = parts.host, !host.isEmpty else { throw Invalid(description: "names no host") }
        guard let user = parts.user, !user.isEmpty else { throw Invalid(description: "names no user") }
        self.host = host
        port = parts.port ?? 5432
        self.user = user.removingPercentEncoding ?? user
        password = parts.password.map { $0.removingPercentEncoding ?? $0 }
        let path = parts.path.hasPrefix("/") ? String(parts.path.dropFirst()) : parts.path
        database = path.isEmpty ? nil : path
        sslMode = parts.queryItems?.first { $0.name == "sslmode" }?.value ?? "disable"
        guard Self.sslModes.contains(sslMode) else {
            throw Invalid(description: "sslmode must be one of \(Self.sslModes.joined(separator: ", "))")
        }
    }

    /// The URL with its password left out, for logs and errors.
    public var description: String { shown }

    /// The URL with its password left out, for logs and errors.
    public var shown: String {
        "postgres://\(user)@\(host):\(port)/\(database ?? "")"
    }
}
