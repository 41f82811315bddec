import AsyncHTTPClient
import Crypto
import Foundation
import GatewayCore
import GatewayHTTP
import Logging

/// Registers `enrichers: keyword_lookup:`.
public enum KeywordLookupPlugin: EnricherPlugin {
    public struct Options: Sendable {
        public var api = "v1"
        public var clientID: String
        public var teamID: String
        public var keyID: String
        /// The team's private key, PEM (from `private_key_file` or `private_key`).
        public var privateKeyPEM: String
        public var tokenEndpoint = "https://appleid.apple.com/auth/oauth2/token"
        public var endpoint: String
        public var wait: Duration = .milliseconds(1000)
        public var ttl: TimeInterval = 7 * 86_400
        public var unknownTTL: TimeInterval = 3600
        /// First wait after a 429, 5xx or failure; Apple asks for 2 s, doubling.
        public var backoffInitial: Duration = .seconds(2)
        /// `spend.enabled`: fetch daily keyword spend from Apple Ads reports.
        public var spendEnabled = false
        /// `spend.fetch_days`: how many days back each daily fetch asks for again, Apple
        /// correcting a day's spend after it ends.
        public var spendDays = 7
    }

    public static let typeName = "keyword_lookup"
    static let endpoints = ["v1": "https://api.ads.apple.com/v1", "v5": "https://api.searchads.apple.com/api/v5"]

    public static func readOptions(_ reader: ConfigReader) -> Options? {
        let before = reader.diagnostics.issues.count
        let api = reader.choice("api", ["v1", "v5"]) ?? "v1"
        let clientID = reader.requiredString("client_id")
        let teamID = reader.requiredString("team_id")
        let keyID = reader.requiredString("key_id")
        var pem: String?
        if let file = reader.secretFilePath("private_key_file") {
            // Read as bytes: a comment in Latin-1 beside the key, or any byte that is not
            // UTF-8, read as "cannot read", which sent operators to permissions and paths.
            if let data = FileManager.default.contents(atPath: file) {
                if PrivateKeyPEM.isBinary(data) {
                    reader.report(
                        "is binary (DER?), not PEM; convert it: openssl ec -inform DER -in KEY -out key.pem",
                        key: "private_key_file")
                } else {
                    pem = String(decoding: data, as: UTF8.self)
                }
            } else {
                reader.report(
                    "cannot read the private key file (missing, or not readable by this user)", key: "private_key_file")
            }
        } else if let inline = reader.string("private_key") {
            pem = inline
        } else {
            reader.report("private_key_file or private_key (PEM, from the environment) is required", key: nil)
        }
        // Checked now, so a bad key fails check-config; the key itself is never echoed.
        if let text = pem {
            let key = reader.has("private_key_file") ? "private_key_file" : "private_key"
            pem = PrivateKeyPEM.block(in: text)
            // The key read is the first block; a text with no plain key block may hold an
            // encrypted one (`BEGIN ENCRYPTED PRIVATE KEY`), and so may that block itself.
            if PrivateKeyPEM.isEncrypted(pem ?? text) {
                reader.report(
                    "is encrypted; write it without a passphrase: openssl pkcs8 -topk8 -nocrypt -in KEY", key: key)
            } else if pem == nil {
                reader.report("holds no PEM block BEGIN EC PRIVATE KEY or BEGIN PRIVATE KEY", key: key)
            } else if (try? P256.Signing.PrivateKey(pemRepresentation: pem!)) == nil {
                reader.report("holds a first key block that is not a P-256 private key", key: key)
            }
        }
        // Checked as URLs, as every other outside base URL is: a typo passed check-config
        // and failed every lookup at run time.
        let tokenEndpoint = reader.url("token_endpoint")
        var endpoint = reader.url("endpoint") ?? endpoints[api]!
        while endpoint.hasSuffix("/") { endpoint.removeLast() }
        let wait = reader.int("wait_ms", in: 0...60_000)
        let ttl = reader.int("cache_ttl_hours", in: 1...(24 * 365))
        let unknown = reader.int("unknown_ttl_minutes", in: 1...(24 * 60 * 30))
        let backoff = reader.int("backoff_initial_ms", in: 1...60_000)
        var spend: (enabled: Bool?, days: Int?) = (nil, nil)
        if let section = reader.child("spend") {
            // DAILY reports reach back 90 days at most.
            spend = (section.bool("enabled"), section.int("fetch_days", in: 1...90))
            section.finish()
        }
        guard reader.diagnostics.issues.count == before, let clientID, let teamID, let keyID, let pem else {
            return nil
        }
        var options = Options(
            api: api, clientID: clientID, teamID: teamID, keyID: keyID, privateKeyPEM: pem, endpoint: endpoint)
        if let tokenEndpoint { options.tokenEndpoint = tokenEndpoint }
        if let wait { options.wait = .milliseconds(wait) }
        if let ttl { options.ttl = Double(ttl) * 3600 }
        if let unknown { options.unknownTTL = Double(unknown) * 60 }
        if let backoff { options.backoffInitial = .milliseconds(backoff) }
        if let enabled = spend.enabled { options.spendEnabled = enabled }
        if let days = spend.days { options.spendDays = days }
        return options
    }

    public static func makeEnricher(options: Options, context: EnricherContext) async throws -> any Enricher {
        try await make(options: options, context: context)
    }

    static func make(
        options: Options, context: EnricherContext, client: HTTPClient = NoRedirectHTTPClient.shared,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
        now: @escaping @Sendable () -> Date = { Date() }
    ) async throws -> KeywordLookupEnricher {
        let secret = AppleAdsClientSecret(
            clientID: options.clientID, teamID: options.teamID, keyID: options.keyID,
            privateKey: try P256.Signing.PrivateKey(pemRepresentation: options.privateKeyPEM))
        let tokens = AppleAdsTokenSource(
            secret: secret, tokenEndpoint: options.tokenEndpoint, client: client, now: now, logger: context.logger)
        var http = AppleAdsHTTP(base: options.endpoint, tokens: tokens, client: client, sleep: sleep)
        http.initialBackoff = options.backoffInitial
        let source: any AppleAdsNameSource & AppleAdsSpendSource =
            options.api == "v5" ? AppleAdsCampaignManagementV5(http: http) : AppleAdsPlatformV1(http: http)
        var spend: SpendCampaigns?
        if options.spendEnabled {
            let store = try await SpendStorage.open(
                storagePath: context.storagePath, storageURL: context.storageURL, logger: context.logger)
            spend = SpendCampaigns(
                store: store,
                fetcher: SpendFetcher(
                    source: source, store: store, days: options.spendDays,
                    logger: context.logger.withSpendJob(), now: now),
                logger: context.logger)
        }
        let enricher = KeywordLookupEnricher(
            source: source,
            cache: try await KeywordNameStorage.open(
                storagePath: context.storagePath, storageURL: context.storageURL, logger: context.logger),
            spend: spend,
            wait: options.wait,
            ttl: options.ttl,
            unknownTTL: options.unknownTTL, logger: context.logger, now: now, sleep: sleep,
            retryInitial: options.backoffInitial, metrics: context.metrics)
        // Weak: the gate is the enricher's own source's, so a strong reference would be a cycle
        // keeping an enricher a reload replaced alive.
        await source.onHold { [weak enricher] in await enricher?.heldByApple() }
        return enricher
    }
}

extension Logger {
    fileprivate func withSpendJob() -> Logger {
        var logger = self
        logger[metadataKey: "job"] = "spend_fetch"
        return logger
    }
}
