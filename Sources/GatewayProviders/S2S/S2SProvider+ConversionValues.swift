import GatewayCore

extension S2SProvider: ConversionValueAnswering {
    /// `POST /v1/events` answers with conversion values from the SKAdNetwork provider's
    /// model, or Singular's answers.
    public func conversionValues(path: String, providers: [any AttributionProvider]) -> (any IngestConversionValues)? {
        guard path == Self.eventsPath else { return nil }
        let skan = providers.lazy.compactMap { $0 as? SKAdNetworkProvider }.first
        return EventConversionValues(model: skan?.options.conversionModel, s2s: options)
    }
}
