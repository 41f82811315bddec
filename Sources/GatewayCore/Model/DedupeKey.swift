/// Builds the dedupe keys that providers give their records.
///
/// The parts come from payloads, so a `:` inside one must not let two different payloads
/// share a key (`app "1:2", user "3"` and `app "1", user "2:3"`). Each part has `%` and
/// `:` percent-encoded, which leaves ordinary ids readable and unchanged.
public enum DedupeKey {
    public static func make(_ provider: String, _ parts: String...) -> String {
        ([provider] + parts.map(escape)).joined(separator: ":")
    }

    static func escape(_ part: String) -> String {
        guard part.contains(where: { $0 == ":" || $0 == "%" }) else { return part }
        return part.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: ":", with: "%3A")
    }
}
