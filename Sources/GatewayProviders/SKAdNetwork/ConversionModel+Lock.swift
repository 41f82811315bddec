import Foundation

extension ConversionModel {
    /// Whether `fine` (window 0 only) and `coarse` are the highest values the model has
    /// for `window`: no later event can raise them, so the app may lock the window
    /// (SKAN 4's `lockWindow`) and its postback comes sooner. False when the model has no
    /// values for the window.
    public func isHighest(window: Int, fine: Int?, coarse: String?) -> Bool {
        guard let model = windows[window] else { return false }
        let topFine = window == 0 ? model.fine.map(\.values.lowerBound).max() : nil
        let topCoarse = Self.coarseLevels.last { model.coarse[$0] != nil }
        guard topFine != nil || topCoarse != nil else { return false }
        if let topFine, (fine ?? -1) < topFine { return false }
        if topCoarse != nil, Self.level(coarse) < Self.level(topCoarse) { return false }
        return true
    }
}
