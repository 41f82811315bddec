import Foundation

extension KeywordReport {
    /// What one person adds to the report, whatever its filters: the install their line
    /// credits. The sums over such facts are apart from them (``build(days:)``), so that
    /// they can be made wherever the facts are kept.
    struct PersonFact {
        /// The person's name (their least key).
        let key: PersonKey
        /// Their app, an index into the report's `apps`.
        let app: Int32
        let install: Install
        /// A tester's: their line is named by it, and counts nothing.
        let isTest: Bool
    }

    /// What one transaction adds, whatever the report's filters: who bought it and when,
    /// the install it is credited to, its amount, and whether it was given back.
    struct PurchaseFact {
        /// The buyer's name (their least key).
        let owner: PersonKey
        /// Its app, an index into the report's `apps`.
        let app: Int32
        let time: Date
        /// The install before it that it is credited to; nil when the buyer has none.
        let install: Install?
        /// The line the buyer installed on: the purchase converts that line's install when
        /// it is credited to the same one.
        let ownerLine: Attribution?
        let refunded: Bool
        let revenue: Decimal?
        let currency: String?
    }

    /// Every person with an install, then every transaction of a buyer who is no tester,
    /// each once, in no particular order.
    func forEachFact(person: (PersonFact) -> Void, purchase: (PurchaseFact) -> Void) {
        let people = people()
        people.forEach { key, user in
            guard let install = user.credited() else { return }
            person(PersonFact(key: key, app: user.app, install: install, isTest: user.isTest))
        }
        for (transaction, bought) in purchases {
            guard !bought.isTest, let claimant = bought.claim else { continue }
            let owner = people.person(claimant)
            let buyer = people[person: owner]
            guard buyer?.isTest != true else { continue }
            let ownerLine = buyer.flatMap { buyer in
                buyer.attribution.map { attributions[Int($0)].line(app: apps[Int(buyer.app)]) }
            }
            purchase(
                PurchaseFact(
                    owner: owner, app: bought.app, time: bought.time, install: buyer?.credited(at: bought.time),
                    ownerLine: ownerLine, refunded: refunded.contains(transaction), revenue: bought.revenue,
                    currency: bought.currency))
        }
    }
}
