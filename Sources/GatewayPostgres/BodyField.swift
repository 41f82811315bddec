import GatewayCore

/// SQL reading a field out of a stored body, which a PostgreSQL store writes under
/// ``StoredKey`` codes (`PostgresStore`'s writes): every query names the field and gets
/// its code here, so none spells a code of its own.
public enum BodyField {
    /// The field `name` of the body `body` (a column, or an expression giving the body's
    /// text) as text; NULL when the body lacks it or is not JSON.
    public static func text(_ name: String, of body: String = "body") -> String {
        "(gateway_json(\(body)) ->> '\(StoredKey.code(of: name))')"
    }

    /// The field `name` as `jsonb`.
    public static func json(_ name: String, of body: String = "body") -> String {
        "(gateway_json(\(body)) -> '\(StoredKey.code(of: name))')"
    }

    /// The column a `jsonb_to_record` definition names to read the field `name`.
    public static func column(_ name: String) -> String {
        "\"\(StoredKey.code(of: name))\""
    }
}
