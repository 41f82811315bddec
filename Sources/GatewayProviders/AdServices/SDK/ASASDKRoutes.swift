import GatewayCore

extension AdServicesProviderPlugin {
    /// The SDK's three functions, served when `providers.adservices.sdk.app_id` is set.
    /// Their refusals count as the provider's: its tokens and records are the provider's.
    static func sdkRoutes(appID: String, context: ProviderRouteContext) -> [ContributedRoute] {
        guard let resolver = context.resolver else { return [] }
        let backend = ASASDKBackend(
            appID: appID, resolver: resolver, pipeline: context.pipeline, logger: context.logger)
        resolver.onFinished { recordIDs in await backend.creditPurchases(answered: recordIDs) }
        resolver.onStart { await backend.creditPurchasesLeftPending() }
        return [
            ContributedRoute(.ingest, "/functions/v1/create-user") { try await backend.createUser($0) },
            ContributedRoute(.ingest, "/functions/v1/resolve-asa-attribution") {
                try await backend.resolveAttribution($0)
            },
            ContributedRoute(.ingest, "/functions/v1/associate-user") { try await backend.associateUser($0) },
        ]
    }
}
