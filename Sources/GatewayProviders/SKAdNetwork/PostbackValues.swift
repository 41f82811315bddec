import GatewayCore

/// Reads a postback's values. A value the gateway does not recognise (a fidelity type
/// or coarse value Apple adds later, a conversion value out of range) refuses a postback
/// that did not verify, as any payload's would be; a verified one is kept without that
/// field, the value staying in `raw` and its name in `unrecognized`: a refusal on Apple's
/// routes only makes the device retry the same postback, nine times, then give up.
struct PostbackValues {
    let verified: Bool
    private(set) var unrecognized: [String] = []

    init(verified: Bool) {
        self.verified = verified
    }

    mutating func read<Value>(_ field: String, _ value: () throws -> Value?) throws -> Value? {
        do {
            return try value()
        } catch let error as GatewayError where verified && error.code == .invalidField {
            unrecognized.append(field)
            return nil
        }
    }
}
