import Foundation
import Testing

@testable import GatewayCore

/// The report breaks ties between installs by record id: the compact form must order ids
/// exactly as their text does, or two readings of one store could credit different lines.
@Suite struct RecordOrderTests {
    @Test func ordersAsTheTextWhateverTheIdsAre() {
        var ids = (0..<200).map { _ in AttributionRecord.newRecordID() }
        ids += (0..<50).map { _ in UUID().uuidString.lowercased() }
        ids += (0..<20).map { _ in UUID().uuidString }  // upper case: kept as text
        ids += ["r1", "r10", "r2", "", "0000000-0000-0000-0000-000000000000", "g0000000-0000-0000-0000-000000000000"]
        ids += ["00000000-0000-0000-0000-0000000000000", "00000000-0000-0000-0000-00000000000"]
        ids += ["ffffffff-ffff-ffff-ffff-ffffffffffff", "00000000-0000-0000-0000-000000000000"]
        for id in ids { #expect(RecordOrder(id).text == id) }
        let byText = ids.sorted()
        let byOrder = ids.map(RecordOrder.init).sorted().map(\.text)
        #expect(byOrder == byText)
        #expect(RecordOrder(ids[0]) == RecordOrder(ids[0]))
    }
}
