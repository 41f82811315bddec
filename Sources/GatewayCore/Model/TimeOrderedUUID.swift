import Foundation

/// UUID version 7 (RFC 9562): 48 bits of Unix milliseconds, 12 bits of the millisecond's
/// fraction, then 62 random bits.
///
/// Record ids key unique indexes written with records (the records', the SQLite sink's,
/// and outbox rows' and pending work's with theirs). A random (version 4) id put each
/// insert on a random leaf page, each page 4 KB more in the WAL and again at the
/// checkpoint; ids that grow with time land on one page near the end.
public enum TimeOrderedUUID {
    /// A new id for the moment `now`, in the usual lowercase 8-4-4-4-12 form.
    public static func make(now: Date = Date()) -> String {
        // Clamped to the 48 bits there are: a Date beyond the year 10889 (or not a number)
        // must not trap or wrap.
        let raw = now.timeIntervalSince1970 * 1000
        let milliseconds = raw.isNaN ? 0 : min(max(0, raw), Double(1 << 48 - 1))
        let whole = UInt64(milliseconds)
        // rand_a holds the rest of the millisecond in 4096ths (RFC 9562's method 3): ids of
        // one millisecond sort by time too, and one 64-bit draw (one getrandom call) suffices.
        let fraction = UInt64((milliseconds - Double(whole)) * 4096) & 0x0FFF
        var generator = SystemRandomNumberGenerator()
        let random = generator.next() as UInt64
        // Layout: unix_ts_ms(48) | ver(4)=7 | rand_a(12) | var(2)=0b10 | rand_b(62).
        let high = (whole << 16) | 0x7000 | fraction
        let low = (random & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        return format(high: high, low: low)
    }

    private static func format(high: UInt64, low: UInt64) -> String {
        let digits: StaticString = "0123456789abcdef"
        return String(unsafeUninitializedCapacity: 36) { buffer in
            var position = 0
            for nibble in 0..<32 {
                if nibble == 8 || nibble == 12 || nibble == 16 || nibble == 20 {
                    buffer[position] = UInt8(ascii: "-")
                    position += 1
                }
                let word = nibble < 16 ? high : low
                buffer[position] = digits.utf8Start[Int((word >> UInt64(60 - 4 * (nibble % 16))) & 0xF)]
                position += 1
            }
            return position
        }
    }
}
