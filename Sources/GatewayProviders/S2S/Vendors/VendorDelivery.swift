import GatewayCore
import Logging

/// Builds the sink that delivers events to one vendor through its adapter. The `s2s`
/// provider says which vendors get which records; how a record is sent is a sink's work,
/// in `GatewaySinks`, which depends on this module and so cannot be named here: the
/// gateway's assembly names it when it registers the provider.
public protocol VendorDelivery: SendableMetatype {
    static func sink(
        adapter: some VendorAdapter, settings: VendorSettings, logger: Logger,
        conversionValues: AnswerWaiters<VendorConversionValue>?
    ) -> any AttributionSink
}
