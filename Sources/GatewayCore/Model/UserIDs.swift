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

    /// Whether `id` names a user: not blank, and not a placeholder.
    public static func isReal(_ id: String) -> Bool {
        let trimmed = id.trimmingCharacters(in: .whitespaces)
        return !trimmed.isEmpty && !placeholders.contains(trimmed.lowercased())
    }
}
