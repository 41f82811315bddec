import GatewayCore
import GatewayProviders
import Logging

/// Delivers the `s2s` provider's vendors with ``VendorSink``: named where the gateway
/// registers the provider, `S2SProviderPlugin<VendorSinkDelivery>`.
public enum VendorSinkDelivery: VendorDelivery {
    public static func sink(
        adapter: some VendorAdapter, settings: VendorSettings, logger: Logger,
        conversionValues: AnswerWaiters<VendorConversionValue>?
    ) -> any AttributionSink {
        VendorSink(adapter: adapter, settings: settings, logger: logger, conversionValues: conversionValues)
    }
}
