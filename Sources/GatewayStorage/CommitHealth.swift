import Foundation
import GRDB
import Synchronization

/// Whether the store's commits are failing, for `/readyz`: a full disk or a damaged file
/// leaves reads (and so a plain ping) working while nothing can be stored, and a load
/// balancer would go on sending every request to an instance that answers each `503`.
///
/// Three failed commits in a row make the store unwritable until the next commit that
/// writes succeeds, or until `window` passes without a failure: an instance taken out of
/// its load balancer gets no requests to commit, so it is let back in to try again. Only
/// the store's own faults count (a full disk, an I/O error, a damaged file, a lock held
/// too long); a refused row (a constraint, an operator's trigger) is about that record.
///
/// A damaged file (SQLite's CORRUPT, NOTADB, three times since the last commit that
/// wrote) is not let back in by time: it does not mend itself, and letting it in every
/// `window` only failed three more requests each time. One such code among other faults
/// is not enough, and once damaged it stays so whatever fails next. A commit that writes
/// still clears it (a request sent to the instance directly).
public final class CommitHealth: Sendable {
    private struct State {
        var failuresInARow = 0
        var lastFailure = Date.distantPast
        var cause = ""
        /// Failures that said the file is damaged, since the last commit that wrote.
        var damage = 0
        /// The store file's path no longer names it: not mended by time either.
        var gone = false
    }

    private let state = Mutex(State())
    let threshold = 3
    let window: TimeInterval = 30

    func succeeded() {
        state.withLock { state in
            state.failuresInARow = 0
            state.damage = 0
            state.gone = false
        }
    }

    func failed(_ error: any Error, at now: Date = Date()) {
        guard Self.isStorageFault(error) else { return }
        state.withLock { state in
            state.failuresInARow += 1
            state.lastFailure = now
            state.cause = Self.describe(error)
            if Self.isDamage(error) { state.damage += 1 }
            state.gone = error is StoreFileIdentity.Gone
        }
    }

    /// What `/readyz` reports, or nil while commits go through.
    public func problem(now: Date = Date()) -> String? {
        state.withLock { state in
            // At once, not after three: every commit from now on goes nowhere.
            if state.gone { return state.cause }
            guard state.failuresInARow >= threshold else { return nil }
            if state.damage >= threshold {
                return "the store is damaged (\(state.failuresInARow) commits failed in a row: \(state.cause));"
                    + " restore it from a backup"
            }
            guard now.timeIntervalSince(state.lastFailure) < window else { return nil }
            return "the store cannot commit (\(state.failuresInARow) failed in a row: \(state.cause))"
        }
    }

    static func isStorageFault(_ error: any Error) -> Bool {
        if error is StoreFileIdentity.Gone { return true }
        guard let error = error as? DatabaseError else { return false }
        return [
            ResultCode.SQLITE_FULL, .SQLITE_IOERR, .SQLITE_CORRUPT, .SQLITE_NOTADB, .SQLITE_READONLY,
            .SQLITE_CANTOPEN, .SQLITE_BUSY, .SQLITE_NOMEM,
        ].contains(error.resultCode)
    }

    static func isDamage(_ error: any Error) -> Bool {
        guard let error = error as? DatabaseError else { return false }
        return [ResultCode.SQLITE_CORRUPT, .SQLITE_NOTADB].contains(error.resultCode)
    }

    /// An error as a log or an answer may show it: SQLite's code and message (which name
    /// the statement, never its values), anything else by its type alone, since its text
    /// could carry a token or a key.
    public static func describe(_ error: any Error) -> String {
        if let error = error as? DatabaseError {
            return "SQLite error \(error.resultCode.rawValue): \(error.message ?? "")"
        }
        if let error = error as? StoreFileIdentity.Gone { return error.description }
        return String(reflecting: type(of: error))
    }
}
