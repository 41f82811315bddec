import CSVSink
import GatewayCore
import GatewayEnrichers
import GatewayProviders
import GatewaySinks

extension PluginRegistry {
    /// Every provider and sink that ships with the gateway: one line per plugin.
    public static var builtIn: PluginRegistry {
        var registry = PluginRegistry()
        registry.register(provider: AdServicesProviderPlugin.self)
        registry.register(provider: IAdProviderPlugin.self)
        registry.register(provider: SKAdNetworkProviderPlugin.self)
        registry.register(provider: S2SProviderPlugin<VendorSinkDelivery>.self)
        registry.register(enricher: KeywordLookupPlugin.self)
        registry.register(sink: SQLiteSinkPlugin.self)
        registry.register(sink: PostgresSinkPlugin.self)
        registry.register(sink: WebhookSinkPlugin.self)
        registry.register(sink: MixpanelSinkPlugin.self)
        registry.register(sink: ExecSinkPlugin.self)
        registry.register(sink: CSVSinkPlugin.self)  // Plugins/CSVSink
        return registry
    }
}
