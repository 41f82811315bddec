import Foundation
import Testing

@testable import GatewayCore

@Suite("Record ids")
struct TimeOrderedUUIDTests {
    @Test("a record id is a lowercase version 7 UUID carrying its moment to the millisecond")
    func versionSeven() throws {
        let moment = Date(timeIntervalSince1970: 1_785_000_123.456)
        let id = TimeOrderedUUID.make(now: moment)
        #expect(id == id.lowercased())
        let uuid = try #require(UUID(uuidString: id))
        let bytes = withUnsafeBytes(of: uuid.uuid) { Array($0) }
        #expect(bytes[6] >> 4 == 7)
        #expect(bytes[8] >> 6 == 0b10)
        let milliseconds = bytes[0..<6].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        #expect(milliseconds == 1_785_000_123_456)
        // Half a millisecond more: rand_a is the fraction, 2048 of 4096.
        let half = try #require(UUID(uuidString: TimeOrderedUUID.make(now: moment.addingTimeInterval(0.0005))))
        let halfBytes = withUnsafeBytes(of: half.uuid) { Array($0) }
        #expect(UInt16(halfBytes[6] & 0x0F) << 8 | UInt16(halfBytes[7]) == 0x800)
        // Dates outside 48 bits of milliseconds give the nearest id there is, not a trap.
        #expect(TimeOrderedUUID.make(now: Date(timeIntervalSince1970: 1e15)).hasPrefix("ffffffff-ffff-7000-"))
        #expect(TimeOrderedUUID.make(now: Date(timeIntervalSince1970: -5)).hasPrefix("00000000-0000-7000-"))
        #expect(TimeOrderedUUID.make(now: Date(timeIntervalSince1970: .nan)).hasPrefix("00000000-0000-7000-"))
    }

    @Test("later ids sort after earlier ones, within a millisecond too, and ids do not repeat")
    func ordered() {
        // Half a millisecond in, so that binary fractions never round a step away.
        let start = Date(timeIntervalSince1970: 1_785_000_000.0005)
        let ids = (0..<2_000).map { TimeOrderedUUID.make(now: start.addingTimeInterval(Double($0) / 1000)) }
        let outOfOrder = zip(ids, ids.dropFirst()).filter { $0 >= $1 }
        #expect(outOfOrder.isEmpty)
        let sameMoment = (0..<10_000).map { _ in TimeOrderedUUID.make(now: start) }
        #expect(Set(sameMoment).count == sameMoment.count)
        // Within a millisecond, by its fraction.
        let early = TimeOrderedUUID.make(now: Date(timeIntervalSince1970: 1_785_000_000.0001))
        let late = TimeOrderedUUID.make(now: Date(timeIntervalSince1970: 1_785_000_000.0009))
        #expect(early < late)
    }
}
