import GatewayCore

/// The checked contents of config.yaml: everything needed to build a running gateway.
/// Only ``ConfigLoader`` makes one, and only when the whole file is valid.
public struct GatewayConfiguration: Sendable {
    public var file: String
    public var server: ServerSettings
    public var storage: StorageSettings
    public var auth: AuthSettings
    public var providers: [PreparedProvider]
    /// Enabled enrichers, in config order (each sees what the previous one filled).
    public var enrichers: [PreparedEnricher] = []
    public var sinks: [ConfiguredSink]
    public var routes: [Route]
    /// What the file allows but should not (a key file others can read), with its line.
    public var warnings: [ConfigIssue] = []
    /// Each sink's, provider's and enricher's settings as written (`sinks.NAME`), secrets as
    /// digests: what ``ConfigurationDiff`` compares, since plugins' options cannot be.
    public var pluginSettings: [String: PluginSettings] = [:]
}

/// `server:`
public struct ServerSettings: Sendable, Equatable {
    /// `host`, default `127.0.0.1`.
    public var host = "127.0.0.1"
    /// `port`, default `8080`; `0` picks a free port.
    public var port = 8080
    /// `max_body_bytes`, default 1 MiB: larger bodies get `413`.
    public var maxBodyBytes = 1_048_576
    /// `noop_route`, default false: serves `POST /v1/noop`, which reads the body and does
    /// nothing, as the benchmark's ceiling, and `POST /v1/noop/iad`, the iAd route's work
    /// with nothing stored.
    public var noopRoute = false
    /// `log_level`: trace, debug, info, notice, warning, error or critical. Default info.
    public var logLevel = "info"
    /// `log_format`: `json` (one object per line, with the request id) or `text`. Default json.
    public var logFormat = "json"
    /// `access_log`: one `info` line per answered request (method, path, status, time).
    /// Default false: at thousands of requests a second, the log would cost more than the work.
    public var accessLog = false
    /// `ready_max_outbox_age_s`: `/readyz` fails while a sink's oldest undelivered record is
    /// older than this many seconds. Default 0: off.
    public var readyMaxOutboxAge = 0
    /// `idle_timeout_ms`: a connection that sends and receives nothing this long is
    /// closed. Default 30 s.
    public var idleTimeoutMs = 30_000
    /// `body_timeout_ms`: a request body still arriving after this long is answered
    /// `408`; one that has stopped arriving, a second later, and its connection closed.
    /// Default 10 s.
    public var bodyTimeoutMs = 10_000
    /// `max_connections`: past this many open connections, new ones wait in the listen
    /// backlog until one closes. Default nil: the process's descriptor limit less 128
    /// (the store, sinks and outside calls need theirs), at most 10,000.
    public var maxConnections: Int?
    /// `max_connections_per_ip`: open connections one client address may hold (IPv6: per
    /// /64; trusted proxies are not counted). Default nil: 256, or a quarter of
    /// `max_connections` when that is less. `0`: no limit but `max_connections`.
    public var maxConnectionsPerIP: Int?
    /// `request_head_timeout_ms`: a new connection that has not sent its first request's
    /// head this long after it opened is closed. Default 10 s.
    public var requestHeadTimeoutMs = 10_000
    /// `rate_limits`: per API key and per client IP, none by default; and per client IP on
    /// the routes anyone may post to, on by default.
    public var rateLimits = RateLimits()
    /// `trusted_proxies`: the load balancers and proxies in front of the gateway. A
    /// request from one of them is the client's named in `X-Forwarded-For` (the nearest
    /// address there that is not itself a trusted proxy), for the per-IP limit. Default
    /// none: the peer is the client, and `X-Forwarded-For` is ignored, since any caller
    /// can write it.
    public var trustedProxies: [IPNetwork] = []
    /// `shutdown_delay_s`: after the first SIGTERM or SIGINT, `/readyz` answers `503` this
    /// long while everything else keeps serving, so that a load balancer stops sending
    /// before the listener closes. Default 0.
    public var shutdownDelaySeconds = 0
    /// `shutdown_timeout_s`: how long a graceful shutdown waits for requests and sink
    /// batches in flight before it cancels them (their records stay in the outbox).
    /// Default 20, under Kubernetes' 30 s grace period.
    public var shutdownTimeoutSeconds = 20

    public init() {}
}

/// `server.rate_limits:` token buckets; absent means unlimited, but for the open routes'.
public struct RateLimits: Sendable, Equatable {
    public struct Limit: Sendable, Equatable {
        /// Requests per second, on average.
        public var rate: Double
        /// Requests at once.
        public var burst: Double

        public init(rate: Double, burst: Double) {
            self.rate = rate
            self.burst = burst
        }
    }
    public var perKey: Limit?
    public var perIP: Limit?
    /// `open_routes_per_ip`: per client IP on the routes that take neither key nor secret
    /// (Apple's postback copies), whose postbacks are kept even when they do not verify.
    /// Default 100 a second, 1,000 at once: far above what one real sender posts, far below
    /// what one client could otherwise make the store keep. `per_second: 0` turns it off.
    public var openRoutesPerIP: Limit? = Self.defaultOpenRoutesPerIP

    public static let defaultOpenRoutesPerIP = Limit(rate: 100, burst: 1000)

    public init() {}
}

/// `storage:`
public struct StorageSettings: Sendable, Equatable {
    /// `sqlite.path`, default `./data/gateway.sqlite`.
    public var sqlitePath = "./data/gateway.sqlite"
    /// `sqlite.durability`: `full` (fsync each commit, the default) or `normal`
    /// (survives a crash of the process, not a power cut).
    public var durability = "full"
    /// `postgres:`, when the store is a PostgreSQL database instead of the SQLite file.
    public var postgres: PostgresStorageSettings?
    /// `retention.raw_days`: how long records keep the payload as it arrived; 0 (the
    /// default) keeps it for as long as the record.
    public var rawDays = 0
    /// `retention.records_days`: how long records are kept at all; 0 (the default) keeps
    /// them for ever.
    public var recordsDays = 0

    public init() {}
}

/// `storage.postgres:`
public struct PostgresStorageSettings: Sendable, Equatable {
    /// `url`: `postgres://user:password@host:5432/database`, `?sslmode=require` for TLS.
    public var url: PostgresURL
    /// `pool_size`: connections per gateway process, default 8.
    public var poolSize = 8
    /// `lease_s`: how long a replica's claim on an outbox batch hides it from the others,
    /// default 60; a replica that dies mid-batch has its batch offered again after it.
    public var leaseSeconds = 60
    /// `timeout_ms`: how long the gateway waits for the database to answer, default 10000.
    /// Kept in the URL (``PostgresURL/timeout``), which carries it to every part that connects.
    public var timeout: Duration {
        get { url.timeout }
        set { url.timeout = newValue }
    }

    public init(url: PostgresURL) {
        self.url = url
    }
}

/// One entry of `sinks:`: the plugin's checked options and the worker's settings.
public struct ConfiguredSink: Sendable {
    public var prepared: PreparedSink
    public var delivery: DeliverySettings
    public var name: String { prepared.name }
}

/// `auth:`
public struct AuthSettings: Sendable, Equatable {
    /// One accepted key: the app it may write for and the SHA-256 of the key. The plain
    /// key is hashed as soon as it is read and never kept.
    public struct Key: Sendable, Equatable {
        public var appID: String
        public var sha256: [UInt8]
        /// `scope`: `app` (the default) for a key inside the app (the ASA SDK's, an app
        /// posting its own iAd dictionary or token), which anyone can read out: it reaches
        /// only the routes an app calls, and has no per-key bucket to spend, only the
        /// per-IP limit. `backend` for a key a server holds: every route of its app.
        public var scope: APIKeyScope

        public init(appID: String, sha256: [UInt8], scope: APIKeyScope = .app) {
            self.appID = appID
            self.sha256 = sha256
            self.scope = scope
        }
    }

    /// `api_keys`: `[{app_id, key, scope}]` or `[{app_id, key_sha256, scope}]`; several per
    /// app for rotation.
    public var apiKeys: [Key] = []
    /// `operator_keys`: the SHA-256 of each key that opens the reports and the dashboard.
    /// Apart from `apiKeys`: an app's key opens no operator route, an operator's key no
    /// ingest route. Empty, the operator routes are closed.
    public var operatorKeys: [[UInt8]] = []

    public init() {}
}
