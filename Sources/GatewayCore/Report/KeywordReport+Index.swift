import Crypto
import Foundation

extension KeywordReport {
    /// A person with an install, as a report index keeps them: what ``Sums`` needs of them
    /// whatever a report's filters.
    public struct IndexedPerson: Sendable, Equatable {
        public let appID: String
        /// The credited install's attribution, names and all.
        public let attribution: Attribution
        /// The line it counts on (``Attribution/line(app:)``).
        public let line: Attribution
        public let installedAt: Date
        /// The install's record id: with ``installedAt``, which install named a line last.
        public let recordID: String
        /// Through an ad (else organic or never answered).
        public let attributed: Bool
        /// The install's `country_or_region` as ``countryNumber(_:)`` gives it.
        public let country: Int
        /// A tester: they name their line and count nothing.
        public let isTest: Bool
    }

    /// A transaction as a report index keeps it.
    public struct IndexedPurchase: Sendable, Equatable {
        /// Its buyer, numbered within the records the facts came from (``indexedFacts()``).
        public let buyer: Int
        public let appID: String
        public let time: Date
        /// The line of the install it is credited to; `unattributed` when the buyer has none.
        public let line: Attribution
        /// The credited install's country (``countryNumber(_:)``), 0 without one.
        public let country: Int
        /// The buyer installed on ``line``: a paying user there converts an install.
        public let converts: Bool
        public let refunded: Bool
        public let revenue: Decimal?
        public let currency: String?
    }

    /// The facts of the records added, each person and transaction once: what a database
    /// keeps to sum them per line with SQL. Records of people apart give facts apart, so
    /// the facts of a store are those of its groups of linked records (``indexNodes(of:)``).
    public func indexedFacts() -> (people: [IndexedPerson], purchases: [IndexedPurchase]) {
        var people: [IndexedPerson] = []
        var purchases: [IndexedPurchase] = []
        var buyers: [PersonKey: Int] = [:]
        forEachFact(
            person: { person in
                let attribution = attributions[Int(person.install.attribution)]
                let app = apps[Int(person.app)]
                people.append(
                    IndexedPerson(
                        appID: app, attribution: attribution, line: attribution.line(app: app),
                        installedAt: person.install.time, recordID: person.install.recordID.text,
                        attributed: person.install.rank == .attributed, country: Int(person.install.country),
                        isTest: person.isTest))
            },
            purchase: { purchase in
                let app = apps[Int(purchase.app)]
                let line = (purchase.install.map { attributions[Int($0.attribution)] } ?? .unattributed).line(app: app)
                let buyer = buyers[purchase.owner] ?? buyers.count
                buyers[purchase.owner] = buyer
                purchases.append(
                    IndexedPurchase(
                        buyer: buyer, appID: app, time: purchase.time, line: line,
                        country: Int(purchase.install?.country ?? 0), converts: purchase.ownerLine == line,
                        refunded: purchase.refunded, revenue: purchase.revenue, currency: purchase.currency))
            })
        return (people, purchases)
    }

    /// Adds to `sums` what records not stored (`live`: tokens Apple has not answered) make
    /// with the stored records of the groups they link to (`linked`), counted here since
    /// a live record may change whose install counts; only `appID`'s, when given. The
    /// filters are this report's.
    public func add(live: [AttributionRecord], linked: [AttributionRecord], appID: String?, to sums: inout Sums) {
        guard !live.isEmpty else { return }
        var counted = self
        for record in linked where appID == nil || record.appID == appID { counted.add(record) }
        for record in live { counted.add(record) }
        counted.add(to: &sums)
    }

    /// The node numbers (``indexNodeNumber(_:)``) of `records`, each once.
    public static func indexNodeNumbers(of records: [AttributionRecord]) -> [Int64] {
        Array(Set(records.flatMap { indexNodes(of: $0) ?? [] }.map(indexNodeNumber)))
    }

    /// A node's name (``indexNodes(of:)``) as the number an index keys it by: 64 bits of the
    /// SHA-256 of its canonical form (``ReportText``), so that ids an app sends cannot be
    /// made to put many people into one group.
    /// Two names of one number only put two groups into one, which changes no sum.
    public static func indexNodeNumber(_ name: String) -> Int64 {
        SHA256.hash(data: Data(ReportText.canonical(name).utf8)).withUnsafeBytes { bytes in
            Int64(bitPattern: bytes.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
        }
    }

    /// A `country_or_region` as the index keeps it: two letters as one number, 0 for none.
    public static func countryNumber(_ text: String?) -> Int { Int(countryCode(text)) }

    /// What links `record` to others in the report, as names: its user id, its device,
    /// its transaction. Records that share none are about different people and
    /// transactions, so a report is the sum of reports over records linked this way; nil
    /// for a record the report reads nothing of.
    public static func indexNodes(of record: AttributionRecord) -> [String]? {
        let app = record.appID ?? ""
        func node(_ kind: String, _ id: String) -> String { "\(app)\u{0}\(kind)\u{0}\(id)" }
        let transaction = record.transactionRef.map { node("t", $0) }
        switch record.kind {
        case .refund:
            return transaction.map { [$0] }
        case .install, .reinstall, .purchase:
            var nodes: [String] = []
            if let user = record.appUserID { nodes.append(node("u", user)) }
            if let idfv = record.idfv, idfv != AttributionRecord.unsetDeviceID {
                nodes.append(node("d", idfv.uppercased()))
            }
            if record.kind == .purchase {
                if let transaction { nodes.append(transaction) }
                // A purchase with neither user nor device is its own buyer.
                if nodes.isEmpty { nodes.append(node("r", record.recordID)) }
            }
            return nodes.isEmpty ? nil : nodes
        default:
            return nil
        }
    }
}

/// Records linked by their nodes (``KeywordReport/indexNodes(of:)``), with the facts they
/// make: what a report index keeps under one group id.
public struct IndexedGroup<Node: Hashable & Comparable & Sendable>: Sendable {
    /// The stored records of the group, by their place in storage.
    public var seqs: [Int64] = []
    public var nodes: Set<Node> = []
    public var people: [KeywordReport.IndexedPerson] = []
    public var purchases: [KeywordReport.IndexedPurchase] = []

    /// `records` split into groups by the nodes they share, each with its facts; `node`
    /// names a node as the index keys it. Records the report reads nothing of are in none.
    public static func groups(_ records: [(seq: Int64, record: AttributionRecord)], node: (String) -> Node)
        -> [IndexedGroup]
    {
        var linked: [(seq: Int64, record: AttributionRecord, nodes: [Node])] = []
        for (seq, record) in records {
            if let names = KeywordReport.indexNodes(of: record) { linked.append((seq, record, names.map(node))) }
        }
        var joined = UnionFind<Node>()
        for entry in linked {
            for other in entry.nodes.dropFirst() { joined.union(entry.nodes[0], other) }
        }
        var members: [Node: [Int]] = [:]
        for (index, entry) in linked.enumerated() {
            members[joined.root(of: entry.nodes[0]), default: []].append(index)
        }
        return members.values.map { indices in
            var group = IndexedGroup()
            var report = KeywordReport()
            for index in indices {
                let entry = linked[index]
                report.add(entry.record)
                group.seqs.append(entry.seq)
                group.nodes.formUnion(entry.nodes)
            }
            (group.people, group.purchases) = report.indexedFacts()
            return group
        }
    }
}
