import GatewayCore

/// Reads a postback's values. A value the gateway does not recognise (a fidelity type,
/// coarse value or sequence index Apple adds later, a conversion value out of range)
/// leaves that field out of the record, the value staying in `raw` and its name in
/// `unrecognized`, whatever the signature's verdict: every postback that reaches here is
/// stored (a verified one as data, the rest quarantined), and a refusal on Apple's routes
/// only makes the device retry the same postback, nine times, then give up. The postbacks
/// most likely to carry a value new to the gateway are those it cannot verify yet: a new
/// version, a key Apple rotated. A forgery with one stays visible as a forgery.
struct PostbackValues {
    private(set) var unrecognized: [String] = []

    /// Leaves out the value of `field` read earlier, which Apple could not have sent there.
    mutating func leaveOut(_ field: String) {
        unrecognized.append(field)
    }

    mutating func read<Value>(_ field: String, _ value: () throws -> Value?) throws -> Value? {
        do {
            return try value()
        } catch let error as GatewayError where error.code == .invalidField {
            unrecognized.append(field)
            return nil
        }
    }
}
