import Foundation
import GatewayCore

extension ConfigIssue {
    /// What config paths are made of (snake_case keys, sink names, indexes): a path with
    /// anything else in it holds a key name that came from a typo, perhaps a secret's.
    private static let plainPath = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyz0123456789_-.[]")

    /// The issue as a log may hold it (`serve`'s start, a reload): an issue under `auth`,
    /// or naming a key that is no plain name, by its position only, since a typo such as
    /// `key "…"` (no colon) makes the key itself part of the message. `check-config`
    /// prints everything.
    public var descriptionForLog: String {
        let plain = path.unicodeScalars.allSatisfy(Self.plainPath.contains)
        guard path.hasPrefix("auth") || !plain else { return description }
        let section = path.prefix { $0 != "." && $0 != "[" }
        return "\(position): \(section): a problem here, not shown in the log as it may quote a key;"
            + " `attribution-gateway check-config \(file)` shows it"
    }
}
