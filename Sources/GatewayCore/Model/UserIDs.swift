import Foundation

/// What an app's user id can say about a user.
public enum UserIDs {
    /// Ids apps send when they have no user: they name nobody, and joined on they would
    /// make one user of everyone who sent them (Mixpanel refuses them as `distinct_id` for
    /// that reason).
    public static let placeholders: Set<String> = [
        "anon", "anonymous", "null", "none", "nil", "undefined", "0", "-1", "unknown", "[]", "{}",
        "00000000-0000-0000-0000-000000000000", "lmy47d", "email", "false", "true",
    ]

    /// How a forgotten user's stand-in ids begin (``ForgetSweep/reduced()``).
    public static let forgottenPrefix = "forgotten-"

    /// Whether `id` names a user: not blank, not a placeholder, and not the stand-in of a
    /// forgotten user's id (sent on, it would make a new user of nobody).
    public static func isReal(_ id: String) -> Bool {
        let trimmed = id.trimmingCharacters(in: .whitespaces)
        return !trimmed.isEmpty && !placeholders.contains(trimmed.lowercased()) && !isStandIn(trimmed)
    }

    /// Whether `id` is a stand-in exactly as a forget makes one (`forgotten-` and a UUID):
    /// an app's own id that merely begins so (`forgotten-password-flow`) names a user.
    static func isStandIn(_ id: String) -> Bool {
        id.hasPrefix(forgottenPrefix) && UUID(uuidString: String(id.dropFirst(forgottenPrefix.count))) != nil
    }
}
