import Foundation

/// Accepted payloads whose records wait for an outside answer (an AdServices token Apple
/// has not resolved yet).
///
/// The contract every backend keeps:
/// - work is admitted once per dedupe key and app, and never beside a stored record of
///   the same key;
/// - a claim hides the work from other claims for its lease, so that work a crash
///   interrupts comes back by itself when the lease ends;
/// - settling replaces finished work by its records (with their outbox rows) in one
///   transaction, and reschedules the rest.
///
/// A deferred provider's `state` is a JSON object that names the work's user in its
/// `appUserID`, `idfv` and `idfa` members, so that a forget request finds and drops the
/// work before it becomes a record of the user's (``ForgetStore``).
public protocol PendingStore: Sendable {
    /// Keeps accepted work, due now, unless its dedupe key is already a record or pending.
    func addPending(_ work: PendingWork, now: Date) async throws -> PendingAdmission

    /// Up to `limit` of `provider`'s due work, oldest due first, each hidden from further
    /// claims for `lease` so that work a crash interrupts comes back by itself.
    func claimPending(provider: String, now: Date, lease: Duration, limit: Int) async throws -> [PendingWork]

    /// When `provider`'s next pending work is due, if it has any.
    func nextPendingDate(provider: String) async throws -> Date?

    /// Writes the outcomes of a round of attempts in one transaction: finished work is
    /// replaced by its records (with their outbox rows), the rest gets its next attempt.
    /// Finished work no longer pending (a forget request dropped it) stores nothing.
    /// Returns the ingest results of each finished work's records, by record id.
    func settlePending(_ settlements: [PendingSettlement]) async throws -> [String: [IngestResult]]

    /// Pending work per provider.
    func pendingCounts() async throws -> [String: Int]

    /// Whether the work that will become record `recordID` is still waiting.
    func isPending(recordID: String) async throws -> Bool

    /// Work waiting for its answer, in record id order after `cursor` (a record id; nil
    /// from the start), without claiming it: for reports.
    func waitingWork(after cursor: String?, limit: Int) async throws -> [PendingWork]
}

/// The outcome of one attempt at pending work, as the store writes it.
public enum PendingSettlement: Sendable {
    /// These records replace the work `recordID`.
    case finished(recordID: String, records: [RoutedRecord])
    /// The work stays, with new state, for another attempt at `at`.
    case retry(recordID: String, state: Data, attempts: Int, at: Date, error: String)
}
