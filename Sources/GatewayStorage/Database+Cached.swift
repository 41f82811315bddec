import GRDB

extension Database {
    /// Runs one statement from the connection's statement cache. The store's statements
    /// are few and run once per record or per batch; compiling each anew (GRDB's
    /// authorizer included) was a measurable share of every commit.
    func executeCached(_ sql: String, _ arguments: StatementArguments = StatementArguments()) throws {
        try cachedStatement(sql: sql).execute(arguments: arguments)
    }
}
