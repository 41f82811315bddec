/// What a batch of the report indexer changes in a store's tables. Groups keep the id they
/// had where they can, and only rows that differ are deleted or written: a purchase joining
/// an install's group adds its own rows and leaves the install's as they are, so
/// PostgreSQL keeps no dead copy of them and neither store rewrites their index entries.
public enum ReportIndexChanges {
    /// An id for each of `groups`, in order: the smallest of its records' former group ids
    /// (`formerGroups`, by seq) that no group before it took, or nil where none is left
    /// and the store numbers the group anew. A group split in two keeps its id in one part.
    public static func keptIDs(of groups: [IndexedGroup<Int64>], formerGroups: [Int64: Int64]) -> [Int64?] {
        var taken: Set<Int64> = []
        return groups.map { group in
            let former = Set(group.seqs.compactMap { formerGroups[$0] }).subtracting(taken)
            guard let id = former.min() else { return nil }
            taken.insert(id)
            return id
        }
    }

    /// The keys of the rows in `old` that `new` does not hold, and the rows of `new` that
    /// `old` does not, a row written twice counting twice.
    public static func difference<Key, Row: Hashable>(old: [(key: Key, row: Row)], new: [Row])
        -> (deleted: [Key], added: [Row])
    {
        var wanted: [Row: Int] = [:]
        for row in new { wanted[row, default: 0] += 1 }
        var deleted: [Key] = []
        for (key, row) in old {
            if let count = wanted[row], count > 0 {
                wanted[row] = count - 1
            } else {
                deleted.append(key)
            }
        }
        var added: [Row] = []
        for row in new {
            if let count = wanted[row], count > 0 {
                wanted[row] = count - 1
                added.append(row)
            }
        }
        return (deleted, added)
    }
}

/// The rows a report index keeps for a group's facts, with attributions by their ids in
/// `report_attributions`: what ``ReportIndexChanges/difference(old:new:)`` compares.
public enum ReportIndexRow {
    public struct Person: Hashable, Sendable {
        public var group: Int64, appID: String, line: Int64, attribution: Int64, installedAt: Double
        public var recordID: String, attributed: Bool, country: Int, isTest: Bool

        public init(
            group: Int64, appID: String, line: Int64, attribution: Int64, installedAt: Double, recordID: String,
            attributed: Bool, country: Int, isTest: Bool
        ) {
            (self.group, self.appID, self.line, self.attribution, self.installedAt) =
                (group, appID, line, attribution, installedAt)
            (self.recordID, self.attributed, self.country, self.isTest) = (recordID, attributed, country, isTest)
        }

        public init(_ person: KeywordReport.IndexedPerson, group: Int64, id: (KeywordReport.Attribution) -> Int64) {
            self.init(
                group: group, appID: person.appID, line: id(person.line), attribution: id(person.attribution),
                installedAt: person.installedAt.timeIntervalSinceReferenceDate, recordID: person.recordID,
                attributed: person.attributed, country: person.country, isTest: person.isTest)
        }
    }

    public struct Purchase: Hashable, Sendable {
        public var group: Int64, appID: String, buyer: Int64, time: Double, line: Int64, country: Int
        public var converts: Bool, refunded: Bool, revenue: String?, currency: String?

        public init(
            group: Int64, appID: String, buyer: Int64, time: Double, line: Int64, country: Int, converts: Bool,
            refunded: Bool, revenue: String?, currency: String?
        ) {
            (self.group, self.appID, self.buyer, self.time, self.line) = (group, appID, buyer, time, line)
            (self.country, self.converts, self.refunded, self.revenue, self.currency) =
                (country, converts, refunded, revenue, currency)
        }

        /// The buyer numbered within the group (``KeywordReport/IndexedPurchase/buyer``) as
        /// one number across groups.
        public init(
            _ purchase: KeywordReport.IndexedPurchase, group: Int64, id: (KeywordReport.Attribution) -> Int64
        ) {
            self.init(
                group: group, appID: purchase.appID, buyer: group << 32 | Int64(purchase.buyer),
                time: purchase.time.timeIntervalSinceReferenceDate, line: id(purchase.line),
                country: purchase.country, converts: purchase.converts, refunded: purchase.refunded,
                revenue: purchase.revenue.map { "\($0)" }, currency: purchase.currency)
        }
    }
}

/// The rows of a batch's groups, once each has its id: what both stores write, and what
/// they compare with the rows the former groups left (``changes(members:nodes:people:purchases:)``).
public struct ReportIndexRows: Sendable {
    /// A row of `report_members` or `report_nodes`: a seq or node and its group.
    public struct Pair: Hashable, Sendable {
        public var key: Int64, group: Int64

        public init(key: Int64, group: Int64) {
            (self.key, self.group) = (key, group)
        }
    }

    public var members: [Pair] = [], nodes: [Pair] = []
    public var people: [ReportIndexRow.Person] = [], purchases: [ReportIndexRow.Purchase] = []

    /// The rows of `groups` under `ids` (in order), naming attributions by `attributionID`.
    public init(
        _ groups: [IndexedGroup<Int64>], ids: [Int64], attributionID: (KeywordReport.Attribution) -> Int64
    ) {
        for (group, groupID) in zip(groups, ids) {
            members += group.seqs.map { Pair(key: $0, group: groupID) }
            nodes += group.nodes.map { Pair(key: $0, group: groupID) }
            people += group.people.map { ReportIndexRow.Person($0, group: groupID, id: attributionID) }
            purchases += group.purchases.map { ReportIndexRow.Purchase($0, group: groupID, id: attributionID) }
        }
    }

    /// The attributions the facts of `groups` name, which need ids before the rows are made.
    public static func attributions(of groups: [IndexedGroup<Int64>]) -> Set<KeywordReport.Attribution> {
        var attributions: Set<KeywordReport.Attribution> = []
        for group in groups {
            for person in group.people { attributions.formUnion([person.line, person.attribution]) }
            for purchase in group.purchases { attributions.insert(purchase.line) }
        }
        return attributions
    }

    /// What the store deletes (by member seq, node, and the place of a person or purchase
    /// row) and inserts so that the former groups' rows become these.
    public func changes<Place>(
        members formerMembers: [Pair], nodes formerNodes: [Pair],
        people formerPeople: [(key: Place, row: ReportIndexRow.Person)],
        purchases formerPurchases: [(key: Place, row: ReportIndexRow.Purchase)]
    ) -> Changes<Place> {
        let members = ReportIndexChanges.difference(old: formerMembers.map { ($0.key, $0) }, new: self.members)
        let nodes = ReportIndexChanges.difference(old: formerNodes.map { ($0.key, $0) }, new: self.nodes)
        let people = ReportIndexChanges.difference(old: formerPeople, new: self.people)
        let purchases = ReportIndexChanges.difference(old: formerPurchases, new: self.purchases)
        return Changes(
            deleted: (members.deleted, nodes.deleted, people.deleted, purchases.deleted),
            added: ReportIndexRows(
                members: members.added, nodes: nodes.added, people: people.added, purchases: purchases.added))
    }

    /// The rows to delete, by key, and those to insert.
    public struct Changes<Place>: Sendable where Place: Sendable {
        public var deleted: (members: [Int64], nodes: [Int64], people: [Place], purchases: [Place])
        public var added: ReportIndexRows
    }

    init(members: [Pair], nodes: [Pair], people: [ReportIndexRow.Person], purchases: [ReportIndexRow.Purchase]) {
        (self.members, self.nodes, self.people, self.purchases) = (members, nodes, people, purchases)
    }
}
