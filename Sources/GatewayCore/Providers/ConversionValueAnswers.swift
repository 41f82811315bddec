import Foundation

/// A provider whose ingest answers carry SKAN conversion values for the app to set (the
/// `s2s` provider's `POST /v1/events`). Asked at the start of each request, with the
/// providers as they stand, so that a reload's change applies from the next request.
public protocol ConversionValueAnswering: AttributionProvider {
    /// The values for a request on `path`; nil when its answers carry none. `providers` are
    /// the enabled ones, for a model another provider owns.
    func conversionValues(path: String, providers: [any AttributionProvider]) -> (any IngestConversionValues)?
}

/// One request's conversion values, told of its records around their storing.
public protocol IngestConversionValues: Sendable {
    /// Called before the records are stored, so that an answer that comes before the
    /// request asks for it is kept.
    func expect(_ records: [AttributionRecord]) async
    /// Called when the request failed after ``expect(_:)``.
    func forget(_ records: [AttributionRecord]) async
    /// One per outcome, in order: nil for a record whose answer carries none.
    func values(for outcomes: [IngestOutcome], now: Date) async -> [EventConversionValue?]
}

/// An event's conversion values, as its answer carries them.
public struct EventConversionValue: Sendable, Equatable {
    public var fineValue: Int?
    public var coarseValue: String?
    public var lockWindow: Bool?
    /// The SKAN 4 window the model answered for.
    public var window: Int?
    /// Where the values come from: `model` or `singular`.
    public var source: String

    public init(
        fineValue: Int? = nil, coarseValue: String? = nil, lockWindow: Bool? = nil, window: Int? = nil, source: String
    ) {
        self.fineValue = fineValue
        self.coarseValue = coarseValue
        self.lockWindow = lockWindow
        self.window = window
        self.source = source
    }
}
