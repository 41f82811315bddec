import Foundation
import GatewayCore

/// Registers the AdServices provider under `providers: adservices:`.
public enum AdServicesProviderPlugin: ProviderPlugin {
    public typealias Options = AdServicesProvider.Options
    public static let typeName = AdServicesProvider.typeName

    public static func readOptions(_ reader: ConfigReader) -> Options? {
        var options = Options()
        let before = reader.diagnostics.issues.count
        if let endpoint = reader.url("endpoint") { options.endpoint = endpoint }
        // Apple holds a connection up to a second before answering 404.
        if let ms = reader.int("timeout_ms", in: 1500...120_000) { options.timeout = .milliseconds(ms) }
        if let n = reader.int("not_found_retries", in: 0...100) { options.notFoundRetries = n }
        if let ms = reader.int("not_found_interval_ms", in: 1...3_600_000) {
            options.notFoundInterval = .milliseconds(ms)
        }
        if let ms = reader.int("error_backoff_initial_ms", in: 1...3_600_000) {
            options.errorBackoffInitial = .milliseconds(ms)
        }
        if let ms = reader.int("error_backoff_max_ms", in: 1...86_400_000) {
            options.errorBackoffMax = .milliseconds(ms)
        }
        if let hours = reader.int("give_up_after_hours", in: 1...720) { options.giveUpAfter = .seconds(hours * 3600) }
        if let ms = reader.int("answer_wait_ms", in: 0...30_000) { options.answerWait = .milliseconds(ms) }
        if let n = reader.int("concurrency", in: 1...256) { options.concurrency = n }
        if let sdk = reader.child("sdk") {
            options.sdkAppID = sdk.requiredString("app_id")
            sdk.finish()
        }
        if options.errorBackoffMax < options.errorBackoffInitial {
            reader.report(
                "error_backoff_max_ms must not be less than error_backoff_initial_ms", key: "error_backoff_max_ms")
        }
        return reader.diagnostics.issues.count == before ? options : nil
    }

    public static func makeProvider(options: Options) throws -> any AttributionProvider {
        AdServicesProvider(options: options)
    }

    public static func routes(options: Options, context: ProviderRouteContext) -> [ContributedRoute] {
        options.sdkAppID.map { sdkRoutes(appID: $0, context: context) } ?? []
    }
}
