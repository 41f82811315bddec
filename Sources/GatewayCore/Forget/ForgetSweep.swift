import Foundation

/// The reduction of one user's records, the same on every backend: which stored records
/// are the user's, the ids they hold, and each record as it is kept afterwards.
///
/// A record is the user's when it names the user id the request names, or when it names
/// no real user id and one of the user's devices: those named, and those on the user's own
/// records. A record naming another user id is never the user's, even on a shared device,
/// and a placeholder id (`anonymous`, `0`) names nobody: following ids from record to record
/// would have forgotten everyone who ever shared a device or a placeholder with the user.
///
/// A backend reads the app's records that hold one of ``searchIDs``, offers each to
/// ``add(_:)``, and reads again while that finds devices not searched yet (an install may
/// name the IDFV and the IDFA), then writes ``reduced()`` over them.
public struct ForgetSweep: Sendable {
    public let appID: String
    /// Every id found, for the sinks.
    public private(set) var identifiers = ForgottenIdentifiers()
    /// The user's records, as read.
    public private(set) var matched: [AttributionRecord] = []
    /// The user id named, if any: the only one the sweep ever follows.
    private let user: String?
    private var idfvs: Set<String> = []
    private var idfas: Set<String> = []
    private var recordIDs: Set<String> = []
    /// Each id's stand-in, the same for every record of the request.
    private var pseudonyms: [String: String] = [:]

    /// Rounds of reading at most: devices found in a round are searched in the next.
    public static let maxRounds = 4

    public init(_ subject: ForgetSubject) {
        appID = subject.appID
        user = subject.appUserID.flatMap { UserIDs.isReal($0) ? $0 : nil }
        idfvs.formUnion([subject.idfv].compactMap(\.self))
        idfas.formUnion([subject.idfa].compactMap(\.self))
        // The ids named go to the sinks even when the store holds no record of them any more
        // (retention deleted them, or an earlier request reduced them): a sink's table may.
        identifiers.appUserIDs = [user].compactMap(\.self)
        identifiers.idfvs = idfvs.sorted()
        identifiers.idfas = idfas.sorted()
    }

    /// The ids to read records by, sorted. The user id in its composed and decomposed
    /// forms too: a store compares bytes, and an app may send `é` either way, where the
    /// report counts them as one person.
    public var searchIDs: (appUserIDs: [String], idfvs: [String], idfas: [String]) {
        let spellings = user.map { user in
            [user, user.precomposedStringWithCanonicalMapping, user.decomposedStringWithCanonicalMapping]
        }
        let unique = Dictionary((spellings ?? []).map { (Array($0.utf8), $0) }) { first, _ in first }
        return (
            unique.values.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }, idfvs.sorted(),
            idfas.sorted()
        )
    }

    /// Whether `record` is one of the user's not offered yet (a backend's search may find
    /// more, and a round finds the earlier rounds' records again).
    public func matches(_ record: AttributionRecord) -> Bool {
        guard record.appID == appID, record.kind != .forget, !recordIDs.contains(record.recordID) else { return false }
        return names(user: record.appUserID, idfv: record.idfv, idfa: record.idfa)
    }

    /// Whether pending work's `state` (see ``PendingStore``) is the user's, by the rule
    /// records follow.
    public func matchesPending(state: Data) -> Bool {
        guard case .object(let fields)? = try? JSONValue.parse(state) else { return false }
        func string(_ key: String) -> String? {
            if case .string(let text)? = fields[key] { return text }
            return nil
        }
        return names(user: string("appUserID"), idfv: string("idfv"), idfa: string("idfa"))
    }

    private func names(user recordUser: String?, idfv: String?, idfa: String?) -> Bool {
        if let recordUser, UserIDs.isReal(recordUser) { return recordUser == user }
        return idfv.map(idfvs.contains) == true || idfa.map(idfas.contains) == true
    }

    /// Takes a record of the user's (``matches(_:)``); returns whether it names a device not
    /// searched by yet.
    @discardableResult
    public mutating func add(_ record: AttributionRecord) -> Bool {
        guard matches(record) else { return false }
        recordIDs.insert(record.recordID)
        matched.append(record)
        identifiers.recordIDs.append(record.recordID)
        // The user id as this record spells it, for the sinks, which compare bytes too.
        if let id = record.appUserID, id == user,
            !identifiers.appUserIDs.contains(where: { $0.utf8.elementsEqual(id.utf8) })
        {
            identifiers.appUserIDs.append(id)
        }
        var found = false
        if let id = record.idfv, id != AttributionRecord.unsetDeviceID, idfvs.insert(id).inserted { found = true }
        if let id = record.idfa, id != AttributionRecord.unsetDeviceID, idfas.insert(id).inserted { found = true }
        // The record's own, and those of a payload stored before the record kept them.
        var vendorIDs = record.vendorIDs ?? [:]
        if case .object(let fields)? = record.raw, case .object(let sent)? = fields["vendor_ids"] {
            for case (let name, .string(let id)) in sent where vendorIDs[name] == nil { vendorIDs[name] = id }
        }
        for (name, id) in vendorIDs.sorted(by: { $0.key < $1.key }) where !id.isEmpty {
            if !(identifiers.vendorIDs[name] ?? []).contains(id) { identifiers.vendorIDs[name, default: []].append(id) }
        }
        identifiers.idfvs = idfvs.sorted()
        identifiers.idfas = idfas.sorted()
        return found
    }

    /// The user's records as the store keeps them: every id of the user's replaced by a
    /// stand-in of this request's, the same for each record (a report still joins the
    /// user's install to their purchases and counts them, and learns no id), without the
    /// raw payload, and with a dedupe key that names nothing of theirs.
    public mutating func reduced() -> [AttributionRecord] {
        matched.map { original in
            var record = original
            record.appUserID = record.appUserID.map { pseudonym(for: "user:" + $0) }
            record.idfv = record.idfv.map { pseudonym(for: "idfv:" + $0) }
            record.idfa = record.idfa.map { pseudonym(for: "idfa:" + $0) }
            // A purchase's App Store transaction ids name the buyer to Apple.
            if record.kind == .purchase || record.kind == .refund {
                record.transactionID = record.transactionID.map { pseudonym(for: "transaction:" + $0) }
            }
            record.transactionRef = record.transactionRef.map { pseudonym(for: "transaction:" + $0) }
            record.vendorIDs = nil
            record.raw = nil
            record.dedupeKey = AttributionRecord.forgottenKeyPrefix + record.recordID
            return record
        }
    }

    private mutating func pseudonym(for id: String) -> String {
        if let known = pseudonyms[id] { return known }
        let made = UserIDs.forgottenPrefix + UUID().uuidString.lowercased()
        pseudonyms[id] = made
        return made
    }
}

extension AttributionRecord {
    static let forgottenKeyPrefix = "forgotten:"

    /// Whether a forget request reduced this record (``ForgetSweep/reduced()``): its ids are
    /// stand-ins, which a sink that identifies users elsewhere must not send.
    public var isForgotten: Bool { dedupeKey.hasPrefix(Self.forgottenKeyPrefix) }

    /// The record that carries a forget request through the sinks' outboxes: it holds no
    /// id of the user's (each sink reads those from the request, while it is open).
    public static func forgetCarrier(requestID: String, appID: String, at date: Date) -> AttributionRecord {
        var record = AttributionRecord(
            provider: "forget", kind: .forget, dedupeKey: "forget:" + requestID, receivedAt: date,
            recordID: requestID)
        record.appID = appID
        return record
    }
}
