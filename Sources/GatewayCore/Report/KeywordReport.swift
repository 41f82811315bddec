import Foundation

/// Which keywords and campaigns bring paying users: installs joined to purchases by app
/// and user, summed per campaign, ad group and keyword.
///
/// A user's attribution is their first attributed install or reinstall (AdServices, iAd,
/// a vendor's callback), else their first one whose source answered that no ad was behind
/// it (`organic`), else `unknown` (Apple never answered: a token not found, refused or
/// still pending). A user with purchases and no install record is `unattributed`; a test
/// install's user (Apple's test token) and their purchases are left out.
///
/// A user is a person: their user id, the devices (IDFV) records gave with it, and the
/// other user ids that claimed one of their purchases (the ASA SDK's user 7 and a
/// backend's user-42 for the same transaction) are one, with all their installs and
/// purchases. A record without a user id is its device's.
///
/// A purchase is credited to the user's attribution among installs made before it (an ad
/// the user met after buying did not bring that purchase; an install's time is its own
/// where the source gives it, and a signal may arrive up to an hour late).
///
/// A purchase counts once per app and transaction (`transaction_ref`), whichever way and
/// under whichever user id it arrived (the ASA SDK's `associate-user` under its own user
/// id, a backend's `/v1/events` under the app's), and keeps the amount of the earliest
/// record that had one. Its time is the
/// purchase's own (`purchase_date`) where a record gave it, else when it was first
/// received. A refund of it (a record of kind `refund` with the same app and
/// `transaction_ref`) takes it out of purchases, revenue and paying users, and counts it
/// under `refunds` on the line it was credited to. Feed records in any order, then read
/// ``rows``.
public struct KeywordReport: Sendable {
    /// One line of the report.
    public struct Row: Sendable, Equatable, Codable {
        /// The app: lines are per app, so that two apps' campaigns of one name, or their
        /// organic users, are not summed together.
        public var appID: String = ""
        public var network: String?
        public var campaignID: Int64?
        public var campaign: String?
        public var adGroupID: Int64?
        public var adGroup: String?
        public var keywordID: Int64?
        public var keyword: String?
        public var matchType: String?
        /// Users whose install this line is.
        public var installs: Int
        /// Of `installs`, those made in the report's period; nil without one. The cost per
        /// install divides the period's spend by these: over every install ever made, a
        /// week's spend looked cheap by the months before it.
        public var installsInPeriod: Int?
        /// Users with at least one purchase credited to this line; a user who bought before
        /// an ad brought them back is paying on their earlier line too.
        public var payingUsers: Int
        /// Purchases not refunded.
        public var purchases: Int
        /// Revenue per currency code, refunded purchases left out.
        public var revenue: [String: Decimal]
        /// Purchases credited to this line and then refunded.
        public var refunds: Int = 0
        /// Of `installs`, the users who are paying on this line: the conversion's numerator.
        /// `payingUsers` can exceed `installs` (a user installed through an ad later, who
        /// bought before it, is paying on the earlier line but installed on the later one).
        public var convertedInstalls: Int = 0
        /// Apple Ads spend per currency on the line's keywords over the report's period;
        /// absent where none is known (no fetch or import covers the keyword, or the line
        /// is not a keyword's).
        public var spend: [String: Decimal]?
        /// Spend per install, per currency; absent without spend or installs.
        public var costPerInstall: [String: Decimal]?
        /// Spend per paying user, per currency; absent without spend or paying users.
        public var costPerPayingUser: [String: Decimal]?
        /// Revenue over spend, per currency where the line has both in it: a line's
        /// revenue in EUR and spend in USD has no ROAS, rather than one mixing the two.
        public var roas: [String: Decimal]?
        /// Of summed lines, per spend currency, what the lines with spend in it counted:
        /// the costs and ROAS divide by these, so a campaign's Search Match installs, which
        /// no keyword's spend paid for, or another currency's keywords, do not dilute them.
        /// Nil on a single line, whose own counts are its basis.
        var pricedBasis: [String: CostBasis]?

        struct CostBasis: Sendable, Equatable {
            var installs = 0
            var payingUsers = 0
            var revenue: Decimal?
        }

        enum CodingKeys: String, CodingKey {
            case network, campaign, keyword
            case campaignID = "campaign_id"
            case adGroupID = "ad_group_id"
            case adGroup = "ad_group"
            case keywordID = "keyword_id"
            case matchType = "keyword_match_type"
            case installs
            case installsInPeriod = "installs_in_period"
            case payingUsers = "paying_users"
            case purchases, revenue, refunds
            case convertedInstalls = "converted_installs"
            case appID = "app_id"
            case spend
            case costPerInstall = "cost_per_install"
            case costPerPayingUser = "cost_per_paying_user"
            case roas
        }

        /// Sets the costs and ROAS from the line's spend, installs, paying users and revenue.
        public mutating func price() {
            guard let spend, !spend.isEmpty else {
                (costPerInstall, costPerPayingUser, roas) = (nil, nil, nil)
                return
            }
            let basis = costBasis
            func per(_ count: KeyPath<CostBasis, Int>) -> [String: Decimal]? {
                var costs: [String: Decimal] = [:]
                for (currency, amount) in spend {
                    guard let count = basis[currency]?[keyPath: count], count > 0 else { continue }
                    costs[currency] = KeywordReport.rounded(amount / Decimal(count), 2)
                }
                return costs.isEmpty ? nil : costs
            }
            costPerInstall = per(\.installs)
            costPerPayingUser = per(\.payingUsers)
            var ratios: [String: Decimal] = [:]
            for (currency, amount) in spend where amount > 0 {
                if let earned = basis[currency]?.revenue {
                    ratios[currency] = KeywordReport.rounded(earned / amount, 4)
                }
            }
            roas = ratios.isEmpty ? nil : ratios
        }

        /// Per spend currency, the counts the costs divide: the summed lines' with spend in
        /// it, or this line's own.
        private var costBasis: [String: CostBasis] {
            if let pricedBasis { return pricedBasis }
            var basis: [String: CostBasis] = [:]
            for currency in (spend ?? [:]).keys {
                basis[currency] = CostBasis(
                    installs: installsInPeriod ?? installs, payingUsers: payingUsers, revenue: revenue[currency])
            }
            return basis
        }

        /// Adds `other`'s counts and revenue to this line's, names untouched: several lines
        /// summed, as a campaign's keywords are. Paying users are summed too, so a user paying
        /// on two of the lines counts twice.
        public mutating func add(_ other: Row) {
            var basis = costBasis
            for (currency, more) in other.costBasis {
                var sum = basis[currency] ?? CostBasis()
                sum.installs += more.installs
                sum.payingUsers += more.payingUsers
                if let earned = more.revenue { sum.revenue = (sum.revenue ?? 0) + earned }
                basis[currency] = sum
            }
            pricedBasis = basis
            installs += other.installs
            if let more = other.installsInPeriod { installsInPeriod = (installsInPeriod ?? 0) + more }
            payingUsers += other.payingUsers
            convertedInstalls += other.convertedInstalls
            purchases += other.purchases
            refunds += other.refunds
            for (currency, amount) in other.revenue { revenue[currency, default: 0] += amount }
            if let more = other.spend {
                var sum = spend ?? [:]
                for (currency, amount) in more { sum[currency, default: 0] += amount }
                spend = sum
            }
            price()
        }
    }

    /// What an install's source says brought it: the line it counts on, with the names it gave.
    public struct Attribution: Hashable, Sendable {
        public var network: String?
        public var campaignID: Int64?
        public var campaign: String?
        public var adGroupID: Int64?
        public var adGroup: String?
        public var keywordID: Int64?
        public var keyword: String?
        public var matchType: String?
        /// Set on lines only: the app whose users they count.
        public var appID: String?

        public init(
            network: String? = nil, campaignID: Int64? = nil, campaign: String? = nil, adGroupID: Int64? = nil,
            adGroup: String? = nil, keywordID: Int64? = nil, keyword: String? = nil, matchType: String? = nil,
            appID: String? = nil
        ) {
            self.network = network
            self.campaignID = campaignID
            self.campaign = campaign
            self.adGroupID = adGroupID
            self.adGroup = adGroup
            self.keywordID = keywordID
            self.keyword = keyword
            self.matchType = matchType
            self.appID = appID
        }

        static let organic = Attribution(network: "organic")
        static let unknown = Attribution(network: "unknown")
        static let unattributed = Attribution(network: "unattributed")

        /// What makes two installs one line: ids where there are ids (a keyword renamed,
        /// or named late, stays one line), names where there are none (vendors).
        public func line(app: String) -> Attribution {
            Attribution(
                network: network, campaignID: campaignID, campaign: campaignID == nil ? campaign : nil,
                adGroupID: adGroupID, adGroup: adGroupID == nil ? adGroup : nil, keywordID: keywordID,
                keyword: keywordID == nil ? keyword : nil, matchType: keywordID == nil ? matchType : nil, appID: app)
        }
    }

    /// How much a user's install says: an ad behind it beats an answer of none, which
    /// beats no answer.
    enum Rank: Int, Comparable {
        case unknown, organic, attributed
        static func < (a: Rank, b: Rank) -> Bool { a.rawValue < b.rawValue }
    }

    struct Install {
        var time: Date
        var rank: Rank
        /// An index into the report's `attributions`: thousands of installs share one
        /// campaign, ad group and keyword, and a copy of their names each was most of the
        /// memory a large store's report took.
        var attribution: Int32
        var recordID: RecordOrder
        /// Its `country_or_region`, two letters packed (``countryCode(_:)``); 0 when none.
        var country: UInt16 = 0

        /// The better answer first; among equals, the earlier (then by record id, so that
        /// any order of records gives the same report).
        static func isWorse(_ a: Install, than b: Install) -> Bool {
            (a.rank, b.time, b.recordID) < (b.rank, a.time, a.recordID)
        }
    }

    struct User {
        /// The first install apart: most users have one, and an array of one each was an
        /// allocation per user.
        private var first: Install?
        private var more: [Install] = []
        var isTest = false
        /// The user's app, an index into the report's `apps`.
        let app: Int32

        init(app: Int32) {
            self.app = app
        }

        mutating func add(_ install: Install) {
            if first == nil { first = install } else { more.append(install) }
        }

        /// Takes `other`'s installs and test mark: the same person.
        mutating func merge(_ other: User) {
            if let install = other.first { add(install) }
            for install in other.more { add(install) }
            isTest = isTest || other.isTest
        }

        /// The install a purchase at `time` is credited to: the best of those before it, an
        /// hour's delay allowed; none when there is none (an ad the user met after buying did
        /// not bring that purchase, however long after: the purchase is unattributed).
        /// Without `time`, the user's own line.
        func credited(at time: Date? = nil) -> Install? {
            var best: Install?
            var bestBefore: Install?
            func consider(_ install: Install) {
                if best.map({ Install.isWorse($0, than: install) }) ?? true { best = install }
                if let time, install.time <= time + KeywordReport.signalDelay,
                    bestBefore.map({ Install.isWorse($0, than: install) }) ?? true
                {
                    bestBefore = install
                }
            }
            if let first { consider(first) }
            for install in more { consider(install) }
            return time == nil ? best : bestBefore
        }

        var attribution: Int32? { credited()?.attribution }
    }

    /// One transaction, however many records told of it.
    struct Purchase {
        /// One user (or device) that a record of it named, tests' records aside: those
        /// records' users are joined into one person as they are added, so one names them.
        var claim: PersonKey?
        /// Those a test's record named (the ASA SDK's user with Apple's test token).
        var testClaims: Set<PersonKey> = []
        /// Its app, an index into the report's `apps`.
        let app: Int32
        /// The earliest record of it (received at, record id) and whether it was a test's.
        var first: (at: Date, recordID: RecordOrder, isTest: Bool)?
        var revenue: Decimal?
        var currency: String?
        /// Which record the amount came from (received at, record id): the earliest wins.
        var amountFrom: (Date, RecordOrder)?
        var purchasedAt: Date?
        var firstReceived = Date.distantFuture

        /// A test's purchase: its first record was a test's. A test's claim on a purchase
        /// another user had made before is left out instead: anyone can get Apple's test
        /// answer from a device in developer mode, and claiming a buyer's transaction with
        /// it took the buyer, installs and purchases, out of the report.
        var isTest: Bool { first?.isTest ?? false }
        /// Everyone it joins into one person beside ``claim``'s: the testers, when it is theirs.
        var testClaimants: Set<PersonKey> { isTest ? testClaims : [] }

        init(app: Int32) {
            self.app = app
        }

        var time: Date { purchasedAt ?? firstReceived }

        /// Takes one record of the transaction, naming `key` as its buyer.
        mutating func take(_ record: AttributionRecord, claim key: PersonKey) {
            if record.isTest { testClaims.insert(key) } else if claim == nil { claim = key }
            let order = RecordOrder(record.recordID)
            if first.map({ (record.receivedAt, order) < ($0.at, $0.recordID) }) ?? true {
                first = (record.receivedAt, order, record.isTest)
            }
            firstReceived = min(firstReceived, record.receivedAt)
            if let date = record.purchaseDate { purchasedAt = min(purchasedAt ?? date, date) }
            // An amount is never replaced by a record without one, and the earliest record
            // with one wins, so the order records are read in does not matter.
            if let amount = record.revenue {
                let from = (record.receivedAt, order)
                if amountFrom.map({ from < $0 }) ?? true {
                    revenue = amount
                    currency = record.currency
                    amountFrom = from
                }
            }
        }
    }

    /// How long after an install its attribution may arrive: a vendor's callback, or
    /// Apple's answer to a token, lands minutes after the app's first purchases can. An
    /// install up to this long after a purchase still counts as before it.
    static let signalDelay: TimeInterval = 3600

    private(set) var users: [PersonKey: User] = [:]
    /// Every distinct attribution of an install, each once; `Install.attribution` indexes it.
    private(set) var attributions: [Attribution] = []
    private var attributionIndex: [Attribution: Int32] = [:]
    private(set) var purchases: [PersonKey: Purchase] = [:]
    /// The transactions (app and `transaction_ref`) given back.
    private(set) var refunded: Set<PersonKey> = []
    /// The apps of the records, each once; users and purchases name theirs by index.
    private(set) var apps: [String] = []
    private var appIndex: [String: Int32] = [:]
    /// Users and devices that are one person, joined as records are added: a device (app
    /// and IDFV) and the user ids records gave with it, the users who claimed one purchase.
    private var joined = UnionFind<PersonKey>()
    /// Purchases before this are left out; installs count from any time, so that a
    /// report of one month credits the keywords that brought its buyers earlier.
    public var purchasesSince: Date?
    /// Purchases at or after this are left out.
    public var purchasesUntil: Date?

    /// Whether the report has a period: then each line also counts its installs made in it.
    public var hasPeriod: Bool { purchasesSince != nil || purchasesUntil != nil }

    /// The installs counted apart for the cost per install: those on the days whose spend
    /// the report counts (the days whose midnight, UTC, falls in the period), so that a
    /// period starting mid-day divides no day's installs by another day's spend.
    public var installsSince: Date? { purchasesSince.map(Self.nextMidnight) }
    public var installsUntil: Date? { purchasesUntil.map(Self.nextMidnight) }

    static func nextMidnight(_ time: Date) -> Date {
        let midnight = Calendar.utc.startOfDay(for: time)
        return midnight == time ? time : midnight.addingTimeInterval(86_400)
    }

    /// Whether an install at `time` counts for the cost per install (``installsSince``).
    func inPeriod(_ time: Date) -> Bool {
        hasPeriod && installsSince.map { time >= $0 } ?? true && installsUntil.map { time < $0 } ?? true
    }
    /// Only lines of this network (``Row/network``).
    public var network: String?
    /// Only users whose install (the one a line credits) was in this country or region
    /// (`country_or_region`, ISO 3166 alpha-2), and the purchases credited to such an
    /// install: a user with no install, or an install that did not say, is left out.
    public var country: String?

    public init(
        purchasesSince: Date? = nil, purchasesUntil: Date? = nil, network: String? = nil, country: String? = nil
    ) {
        self.purchasesSince = purchasesSince
        self.purchasesUntil = purchasesUntil
        self.network = network
        self.country = country
    }

    /// Two ASCII letters, case folded, as one number: a country per install costs two bytes
    /// instead of a string. 0 for anything else.
    static func countryCode(_ text: String?) -> UInt16 {
        guard let text else { return 0 }
        let letters = Array(text.uppercased().utf8)
        guard letters.count == 2, letters.allSatisfy({ (65...90).contains($0) }) else { return 0 }
        return UInt16(letters[0]) << 8 | UInt16(letters[1])
    }

    /// Takes one stored record; records of other kinds, or without a user, are ignored.
    public mutating func add(_ record: AttributionRecord) {
        let app = record.appID ?? ""
        if record.kind == .refund {
            // Whoever sent it: the transaction alone names what was given back.
            if let transaction = record.transactionRef { refunded.insert(PersonKey(app, .transaction, transaction)) }
            return
        }
        // A user is their app's user id; a record with none is its device's (IDFV), which
        // a record with both ties to the user id; a purchase with neither is its own
        // buyer, so that its revenue shows as unattributed instead of nowhere.
        // The all-zero IDFV (an app's unset `identifierForVendor`) names no device; records
        // stored under an earlier rule may carry it, and joined on it every such user is one.
        let device = record.idfv.flatMap {
            $0 == AttributionRecord.unsetDeviceID ? nil : PersonKey(app, .device, $0.uppercased())
        }
        let key: PersonKey
        if let user = record.appUserID {
            key = PersonKey(app, .user, user)
            if let device { joined.union(device, key) }
        } else if let device {
            key = device
        } else if record.kind == .purchase {
            key = PersonKey(app, .purchaseRecord, record.recordID)
        } else {
            return
        }
        let appNumber = intern(app: app)
        switch record.kind {
        case .install, .reinstall:
            // Changed in place: a copy out and back hashed the key twice and copied the user.
            if record.isTest {
                users[key, default: User(app: appNumber)].isTest = true
                return
            }
            let rank: Rank = record.attributed ? .attributed : record.resolution == .resolved ? .organic : .unknown
            let attribution: Attribution =
                switch rank {
                case .attributed: Self.attribution(record)
                case .organic: .organic
                case .unknown: .unknown
                }
            // When the install happened, where the source says (a vendor's `installed_at`,
            // iAd's conversion date), else when its signal arrived.
            let install = Install(
                time: record.conversionDate ?? record.receivedAt, rank: rank, attribution: intern(attribution),
                recordID: RecordOrder(record.recordID), country: Self.countryCode(record.countryOrRegion))
            users[key, default: User(app: appNumber)].add(install)
        case .purchase:
            // A test's purchase is kept for its claim: the backend posting the same
            // transaction under its own user id is the same tester, left out with it.
            let transaction =
                record.transactionRef.map { PersonKey(app, .transaction, $0) }
                ?? PersonKey(app, .recordTransaction, record.recordID)
            if !record.isTest, let claim = purchases[transaction]?.claim { joined.union(claim, key) }
            purchases[transaction, default: Purchase(app: appNumber)].take(record, claim: key)
        default:
            return
        }
    }

    mutating func intern(_ attribution: Attribution) -> Int32 {
        if let index = attributionIndex[attribution] { return index }
        let index = Int32(attributions.count)
        attributions.append(attribution)
        attributionIndex[attribution] = index
        return index
    }

    mutating func intern(app: String) -> Int32 {
        if let index = appIndex[app] { return index }
        let index = Int32(apps.count)
        apps.append(app)
        appIndex[app] = index
        return index
    }

    /// Everyone the records know, as people: a user id, the devices records gave with it,
    /// and the other user ids that claimed the same purchase (the ASA SDK's user 7 and a
    /// backend's user-42) are one person, with all their installs and purchases. Each
    /// person is named by their least key, so any order of records gives the same people.
    func people() -> People {
        // A test's purchase joins its testers too, known only once every record is in.
        // Rare: the copy of the joins this makes is made only then.
        var joined = joined
        for purchase in purchases.values where purchase.isTest {
            let claimants = purchase.testClaimants.sorted()
            guard let first = purchase.claim ?? claimants.first else { continue }
            for claimant in claimants { joined.union(first, claimant) }
        }
        // Users who are one person alone, most of them, stay where they are: copying
        // every user doubled the report's memory.
        var merged: [PersonKey: User] = [:]
        for (key, user) in users {
            let root = joined.root(of: key)
            guard root != key else { continue }
            merged[root, default: users[root] ?? User(app: user.app)].merge(user)
        }
        for purchase in purchases.values where purchase.isTest {
            guard let claimant = purchase.claim ?? purchase.testClaimants.first else { continue }
            let root = joined.root(of: claimant)
            merged[root, default: users[root] ?? User(app: purchase.app)].isTest = true
        }
        return People(joined: joined, users: users, merged: merged)
    }

    /// The people of a report: each named by their least key, with the installs of all
    /// their keys.
    struct People {
        let joined: UnionFind<PersonKey>
        let users: [PersonKey: User]
        /// The people of more than one key (or marked a tester), by name.
        let merged: [PersonKey: User]

        /// The name of the person `key` is part of.
        func person(_ key: PersonKey) -> PersonKey { joined.root(of: key) }

        /// The person named `name`.
        subscript(person name: PersonKey) -> User? { merged[name] ?? users[name] }

        /// Each person once, by name.
        func forEach(_ body: (PersonKey, User) -> Void) {
            for (key, user) in users where merged[key] == nil && joined.root(of: key) == key { body(key, user) }
            for (key, user) in merged { body(key, user) }
        }
    }

    static func attribution(_ record: AttributionRecord) -> Attribution {
        Attribution(
            network: record.network
                ?? (["adservices", "iad"].contains(record.provider) ? appleSearchAds : record.provider),
            campaignID: record.campaignID, campaign: record.campaignName, adGroupID: record.adGroupID,
            adGroup: record.adGroupName, keywordID: record.keywordID, keyword: record.keyword,
            // Records stored before match types had one spelling (iAd's `Exact`) join their keyword's line.
            matchType: KeywordMatchType.normalized(record.keywordMatchType))
    }

    /// The lines, most paying users first, then most installs.
    public var rows: [Row] { build(days: nil).rows }

    /// The lines as ``rows`` gives them, and the same installs and purchases day by day over
    /// `days` (``DailySeries``): the charts' numbers are the table's.
    public func rowsAndDaily(_ days: DailySeries) -> (rows: [Row], daily: DailySeries) {
        let built = build(days: days)
        return (built.rows, built.daily ?? days)
    }

    /// Whether an install is in the report's network and country.
    func admits(_ install: Install, line: Attribution) -> Bool {
        if let network, line.network != network { return false }
        if let country, install.country != Self.countryCode(country) { return false }
        return true
    }

    /// The sums of the facts (``forEachFact(person:purchase:)``) that the report's filters admit.
    func build(days: DailySeries?) -> (rows: [Row], daily: DailySeries?) {
        var sums = Sums(days: days, period: hasPeriod)
        add(to: &sums)
        return (sums.rows, sums.daily)
    }

    /// Adds the facts of these records that the report's filters admit to `sums`: the
    /// records of people apart from those `sums` holds, so that each person counts once.
    public func add(to sums: inout Sums) {
        var paying: [Attribution: Set<PersonKey>] = [:]
        forEachFact(
            person: { person in
                let attribution = attributions[Int(person.install.attribution)]
                let line = attribution.line(app: apps[Int(person.app)])
                sums.name(line, from: attribution, at: (person.install.time, person.install.recordID))
                guard !person.isTest, admits(person.install, line: line) else { return }
                sums.add(line, installs: 1, installsInPeriod: inPeriod(person.install.time) ? 1 : 0)
                sums.daily?.addInstall(at: person.install.time, attributed: person.install.rank == .attributed)
            },
            purchase: { purchase in
                if let purchasesSince, purchase.time < purchasesSince { return }
                if let purchasesUntil, purchase.time >= purchasesUntil { return }
                let attribution = purchase.install.map { attributions[Int($0.attribution)] }
                let line = (attribution ?? .unattributed).line(app: apps[Int(purchase.app)])
                if let network, line.network != network { return }
                if country != nil, !(purchase.install.map { admits($0, line: line) } ?? false) { return }
                if purchase.refunded {
                    sums.add(line, refunds: 1)
                    return
                }
                sums.add(line, purchases: 1)
                if let amount = purchase.revenue, let currency = purchase.currency {
                    sums.add(line, revenue: amount, currency: currency)
                    sums.daily?.addRevenue(amount, currency, at: purchase.time)
                }
                if paying[line, default: []].insert(purchase.owner).inserted {
                    sums.add(line, payingUsers: 1, convertedInstalls: purchase.ownerLine == line ? 1 : 0)
                }
            })
    }

    /// A line with nothing counted yet and no names: where ``Row/add(_:)`` sums lines.
    public static var emptyRow: Row { Row(installs: 0, payingUsers: 0, purchases: 0, revenue: [:]) }

    /// Of `installs`, the share `converted` in percent with one decimal, as the report shows
    /// it (the users paying on the line they installed on: never over 100%); empty without installs.
    public static func conversion(_ converted: Int, of installs: Int) -> String {
        installs > 0 ? String(format: "%.1f", Double(converted) * 100 / Double(installs)) : ""
    }

    static func rounded(_ value: Decimal, _ scale: Int) -> Decimal {
        var value = value
        var result = Decimal()
        NSDecimalRound(&result, &value, scale, .plain)
        return result
    }

    /// `rows` with the spend of their keywords (``Row/spend``, by keyword id, over the
    /// report's period) and the costs and ROAS it gives. Only Apple Search Ads keyword lines
    /// have spend: Apple reports it per keyword.
    ///
    /// A keyword that spent and brought no install or purchase gets a line of its own, so
    /// that spend which brought nothing shows: its app is the spend's (an export's adam id),
    /// else that of its campaign's other lines, else unknown (`""`); with `appID`, only
    /// that app's are added.
    public static func spending(_ rows: [Row], _ spend: [Int64: KeywordSpend], appID: String? = nil) -> [Row] {
        guard !spend.isEmpty else { return rows }
        // Each keyword's spend goes to one line, the one that agrees most with where the
        // spend says it ran: an install posted with a real keyword id and a made-up campaign
        // (an app's key is public) must not copy the keyword's spend onto a line of its own.
        // Lines of different campaigns or ad groups that agree alike (the spend names
        // neither) leave it to a line of its own: which is the keyword's cannot be told.
        // Lines of different apps tie too (an app's key may post under another app id), and
        // spend left to a line of its own takes the app its tied lines share, if they do.
        var chosen: [Int64: (index: Int, agreement: Int, tied: Bool, apps: Set<String>)] = [:]
        var appOfCampaign: [Int64: String] = [:]
        for (index, row) in rows.enumerated() where row.network == appleSearchAds {
            if let campaign = row.campaignID, appOfCampaign[campaign] == nil { appOfCampaign[campaign] = row.appID }
            guard let id = row.keywordID, let known = spend[id], let agreement = agreement(of: row, with: known)
            else { continue }
            guard let best = chosen[id], agreement <= best.agreement else {
                chosen[id] = (index, agreement, false, [row.appID])
                continue
            }
            let other = rows[best.index]
            if agreement == best.agreement,
                (other.appID, other.campaignID, other.adGroupID) != (row.appID, row.campaignID, row.adGroupID)
            {
                chosen[id]?.tied = true
                chosen[id]?.apps.insert(row.appID)
            }
        }
        let rows = rows.enumerated().map { index, row in
            guard let id = row.keywordID, let best = chosen[id], best.index == index, !best.tied, let known = spend[id]
            else { return row }
            var row = row
            row.spend = known.amounts
            row.price()
            return row
        }
        let unlined = spend.compactMap { id, known -> Row? in
            guard chosen[id].map(\.tied) ?? true, known.amounts.values.contains(where: { $0 > 0 }) else { return nil }
            // Tied lines' own apps, not the campaign's first line's (a forged app's may be it).
            let tied = chosen[id].map { $0.apps.count == 1 ? $0.apps.first ?? "" : "" }
            let app = known.appID ?? tied ?? known.campaignID.flatMap { appOfCampaign[$0] } ?? ""
            if let appID, app != appID { return nil }
            var row = Row(
                appID: app, network: appleSearchAds, campaignID: known.campaignID, adGroupID: known.adGroupID,
                keywordID: id, installs: 0, payingUsers: 0, purchases: 0, revenue: [:])
            row.spend = known.amounts
            row.price()
            return row
        }
        return rows
            + unlined.sorted {
                ($0.appID, $0.campaignID ?? 0, $0.adGroupID ?? 0, $0.keywordID ?? 0)
                    < ($1.appID, $1.campaignID ?? 0, $1.adGroupID ?? 0, $1.keywordID ?? 0)
            }
    }

    /// How well a line agrees with where a keyword's spend ran: nil when its app, campaign
    /// or ad group is another; more for each of campaign and ad group that both name alike.
    /// An id the spend lacks (an export without it, stored as 0) agrees with any.
    static func agreement(of row: Row, with spend: KeywordSpend) -> Int? {
        if let app = spend.appID, !app.isEmpty, row.appID != app { return nil }
        var agreement = 0
        for (line, spent, weight) in [(row.campaignID, spend.campaignID, 2), (row.adGroupID, spend.adGroupID, 1)] {
            guard let spent, spent != 0, let line else { continue }
            guard line == spent else { return nil }
            agreement += weight
        }
        return agreement
    }

    /// The network whose ids the keyword cache names (Apple's campaign, ad group and
    /// keyword ids, from AdServices, iAd and vendors' Apple Search Ads callbacks).
    static let appleSearchAds = "Apple Search Ads"
    /// The network of Apple Search Ads lines, as ``Row/network`` names it.
    public static var appleSearchAdsNetwork: String { appleSearchAds }

    /// The cache keys (`keyword:ID`, `adgroup:ID`, `campaign:ID`) of the Apple Search Ads
    /// ids in `rows`: the keyword cache may know their names (Apple's API, `keywords
    /// import`), which records lacked when stored or a caller wrote otherwise.
    public static func nameKeys(_ rows: [Row]) -> [String] {
        var keys: Set<String> = []
        for row in rows where row.network == appleSearchAds {
            if let id = row.keywordID { keys.insert(AppleAdsNameKey.keyword(id)) }
            if let id = row.adGroupID { keys.insert(AppleAdsNameKey.adGroup(id)) }
            if let id = row.campaignID { keys.insert(AppleAdsNameKey.campaign(id)) }
        }
        return keys.sorted()
    }

    /// `rows` named from `names`, keyed as ``nameKeys(_:)``: a cached name is Apple's (or
    /// the operator's import) and wins over the records', which an app's iAd payload
    /// writes as it likes: one post with a real keyword's ids, made-up names and a
    /// far-future date renamed that keyword's line. The records' names stay where the
    /// cache has none.
    public static func naming(_ rows: [Row], from names: [String: (name: String, matchType: String?)]) -> [Row] {
        rows.map { row in
            guard row.network == appleSearchAds else { return row }
            var row = row
            if let id = row.keywordID, let known = names[AppleAdsNameKey.keyword(id)] {
                row.keyword = known.name
                row.matchType = known.matchType ?? row.matchType
            }
            if let id = row.adGroupID, let name = names[AppleAdsNameKey.adGroup(id)]?.name { row.adGroup = name }
            if let id = row.campaignID, let name = names[AppleAdsNameKey.campaign(id)]?.name { row.campaign = name }
            return row
        }
    }
}

/// One keyword's Apple Ads spend over a report's days, and where Apple reported it.
public struct KeywordSpend: Sendable, Equatable {
    public var campaignID: Int64?
    public var adGroupID: Int64?
    /// The app (Apple's adam id), where the source gave it.
    public var appID: String?
    /// Per currency code.
    public var amounts: [String: Decimal]

    public init(campaignID: Int64? = nil, adGroupID: Int64? = nil, appID: String? = nil, amounts: [String: Decimal]) {
        self.campaignID = campaignID
        self.adGroupID = adGroupID
        self.appID = appID
        self.amounts = amounts
    }
}
