import Foundation

extension Decimal {
    /// The binary number nearest the amount's own text: 19.99 reads back as 19.99.
    /// Foundation's own conversion multiplies by a power of ten and gives
    /// 19.990000000000002, which destinations that keep numbers as doubles then show.
    public var doubleThroughText: Double { Double(description) ?? 0 }
}
