/// Who a record of the report is about (a user id, a device, a purchase's own record) or
/// which transaction, within an app, as 128 bits: a million users' keys as strings were
/// an allocation each and most of the report's memory. Two SipHash digests of the parts,
/// keyed at random per process, so that ids an app sends cannot be made to collide; two
/// keys with one digest would take some 2^64 of them.
struct PersonKey: Hashable, Comparable, Sendable {
    enum Kind: UInt8 {
        /// An app's user id.
        case user
        /// A device (its IDFV, upper-cased).
        case device
        /// A purchase with neither: its own buyer.
        case purchaseRecord
        /// A transaction (`transaction_ref`).
        case transaction
        /// A purchase without a transaction: its own.
        case recordTransaction
    }

    private let high: UInt64
    private let low: UInt64

    init(_ app: String, _ kind: Kind, _ id: String) {
        func digest(_ seed: UInt8) -> UInt64 {
            var hasher = Hasher()
            hasher.combine(seed)
            hasher.combine(app)
            hasher.combine(kind.rawValue)
            hasher.combine(id)
            return UInt64(bitPattern: Int64(hasher.finalize()))
        }
        high = digest(0)
        low = digest(1)
    }

    static func < (a: PersonKey, b: PersonKey) -> Bool { (a.high, a.low) < (b.high, b.low) }
}
