import Foundation
import GatewayCore
import Testing

/// The keyword report's joins, on records as providers make them.
@Suite struct KeywordReportTests {
    static let start = Date(timeIntervalSince1970: 1_700_000_000)

    static func install(
        _ user: String, keyword: String?, provider: String = "adservices", at offset: TimeInterval = 0,
        app: String = "1"
    )
        -> AttributionRecord
    {
        var record = AttributionRecord(
            provider: provider, kind: .install, dedupeKey: "\(provider):\(user):\(offset)",
            receivedAt: start.addingTimeInterval(offset), attributed: keyword != nil)
        record.appID = app
        record.appUserID = user
        if let keyword {
            record.campaignID = 1
            record.campaignName = "Brand"
            record.keywordID = 7
            record.keyword = keyword
            // A vendor's callback names the network it credited.
            if provider == "s2s" { record.network = "Apple Search Ads" }
        }
        return record
    }

    static func purchase(
        _ user: String, _ transaction: String?, _ amount: String, _ currency: String = "USD", app: String = "1"
    )
        -> AttributionRecord
    {
        var record = AttributionRecord(provider: "s2s", kind: .purchase, dedupeKey: "p:\(UUID())", receivedAt: start)
        record.appID = app
        record.appUserID = user
        record.transactionRef = transaction
        record.revenue = Decimal(string: amount)
        record.currency = currency
        return record
    }

    /// A vendor's install for user `u<index>`: names, no ids.
    static func vendorInstall(_ index: Int, network: String) -> AttributionRecord {
        var record = AttributionRecord(
            provider: "s2s", kind: .install, dedupeKey: "s2s:\(index)", receivedAt: start, attributed: true)
        record.appID = "1"
        record.appUserID = "u\(index)"
        record.network = network
        return record
    }

    /// Lines alike up to the ad group's name (a vendor's, without ids) come out in the same
    /// order at each run.
    @Test func linesTiedOnTheirCountsComeInTheOrderOfEveryField() {
        var report = KeywordReport()
        for (index, group) in ["mg5", "mg2", "mg0", "mg4", "mg1", "mg3"].enumerated() {
            var record = Self.vendorInstall(index, network: "Moloco")
            record.campaignName = "mc1"
            record.adGroupName = group
            report.add(record)
        }
        #expect(report.rows.map(\.adGroup) == ["mg0", "mg1", "mg2", "mg3", "mg4", "mg5"])
    }

    /// A vendor's lines are keyed by names: `Exact` stored before match types had one
    /// spelling and `EXACT` are one keyword, not two lines.
    @Test func aMatchTypeInAnotherSpellingIsTheSameLine() {
        var report = KeywordReport()
        for (index, matchType) in ["Exact", "EXACT", "exact"].enumerated() {
            var record = Self.vendorInstall(index, network: "Apple Search Ads")
            record.keyword = "calm"
            record.keywordMatchType = matchType
            report.add(record)
        }
        #expect(report.rows.map(\.matchType) == ["EXACT"])
        #expect(report.rows.first?.installs == 3)
    }

    @Test func aRefundedPurchaseLeavesPurchasesRevenueAndPayingUsersAndCountsUnderRefunds() {
        var report = KeywordReport()
        report.add(Self.install("u1", keyword: "calm"))
        report.add(Self.install("u2", keyword: "calm"))
        report.add(Self.purchase("u1", "t1", "9.99"))
        report.add(Self.purchase("u2", "t2", "4.99"))
        report.add(Self.purchase("u2", "t3", "4.99"))
        // App Store Server Notifications' REFUND, posted by the backend without a user id.
        var refund = AttributionRecord(provider: "s2s", kind: .refund, dedupeKey: "r:t1", receivedAt: Self.start)
        refund.appID = "1"
        refund.transactionRef = "t1"
        refund.revenue = Decimal(string: "9.99")
        refund.currency = "USD"
        report.add(refund)
        // A refund of another app's transaction of the same id gives nothing back here.
        var elsewhere = refund
        elsewhere.appID = "2"
        elsewhere.transactionRef = "t2"
        report.add(elsewhere)

        let calm = report.rows.first { $0.keyword == "calm" }
        #expect(calm?.installs == 2)
        #expect(calm?.payingUsers == 1, "u1's only purchase was given back")
        #expect(calm?.purchases == 2)
        #expect(calm?.revenue == ["USD": Decimal(string: "9.98")!])
        #expect(calm?.refunds == 1)
    }

    @Test func anAttributedInstallWinsOverAnOrganicOneAndPurchasesCountOncePerTransaction() {
        var report = KeywordReport()
        // Organic first (AdServices said no), then a vendor credited the keyword.
        report.add(Self.install("u1", keyword: nil, at: 0))
        report.add(Self.install("u1", keyword: "calm", provider: "s2s", at: 60))
        report.add(Self.purchase("u1", "t1", "4.99"))
        report.add(Self.purchase("u1", "t1", "4.99"))  // the SDK and the backend both reported it
        report.add(Self.purchase("u1", "t2", "3.50", "EUR"))
        report.add(Self.install("u2", keyword: "calm", at: 5))
        report.add(Self.purchase("u3", "t3", "1.00"))  // no install known
        var test = Self.install("u4", keyword: "calm")
        test.isTest = true
        report.add(test)

        let rows = report.rows
        let calm = rows.first { $0.keyword == "calm" }
        #expect(calm?.installs == 2 && calm?.payingUsers == 1 && calm?.purchases == 2)
        #expect(calm?.revenue == ["USD": Decimal(string: "4.99")!, "EUR": Decimal(string: "3.50")!])
        // The vendor's install and Apple's own land on one line.
        #expect(calm?.network == "Apple Search Ads")
        let unattributed = rows.first { $0.network == "unattributed" }
        #expect(unattributed?.installs == 0 && unattributed?.payingUsers == 1)
        #expect(rows.count == 2)
    }

    @Test func theSameUserIdInAnotherAppIsAnotherUser() {
        var report = KeywordReport()
        report.add(Self.install("u", keyword: "calm", app: "1"))
        report.add(Self.purchase("u", "t", "1.00", app: "2"))
        let rows = report.rows
        #expect(rows.first { $0.keyword == "calm" }?.payingUsers == 0)
        #expect(rows.first { $0.network == "unattributed" }?.payingUsers == 1)
    }
}

extension KeywordReportTests {
    @Test func aKeywordNamedLateOrRenamedStaysOneLineUnderItsLatestName() {
        var report = KeywordReport()
        var early = Self.install("u1", keyword: "calm", at: 0)
        early.keyword = nil  // routed before its name came
        report.add(early)
        report.add(Self.install("u2", keyword: "calm app", at: 60))
        let rows = report.rows
        #expect(rows.count == 1)
        #expect(rows.first?.installs == 2 && rows.first?.keyword == "calm app" && rows.first?.keywordID == 7)
    }

    /// Two installs of a line at the same time: the names of the later record, read in
    /// either order.
    @Test func amongInstallsOfOneTimeTheLaterRecordNamesTheLine() {
        let first = Self.install("zed", keyword: "calm", at: 0)
        let later = Self.install("amy", keyword: "calm app", at: 0)
        #expect(first.recordID < later.recordID)
        for order in [[first, later], [later, first]] {
            var report = KeywordReport()
            order.forEach { report.add($0) }
            #expect(report.rows.first?.keyword == "calm app", "\(report.rows)")
        }
    }

    @Test func purchasesSinceACutoffStillCreditTheKeywordOfAnEarlierInstall() {
        var report = KeywordReport(purchasesSince: Self.start.addingTimeInterval(100))
        report.add(Self.install("u1", keyword: "calm", at: 0))
        var old = Self.purchase("u1", "t0", "2.00")
        old.receivedAt = Self.start
        report.add(old)
        var recent = Self.purchase("u1", "t1", "5.00")
        recent.receivedAt = Self.start.addingTimeInterval(200)
        report.add(recent)
        let calm = report.rows.first { $0.keyword == "calm" }
        #expect(calm?.purchases == 1 && calm?.revenue == ["USD": 5])
        // Its installs still count from any time; those on the period's spend days (from the
        // first midnight in it, UTC) are counted apart, for the cost per install.
        #expect(calm?.installs == 1 && calm?.installsInPeriod == 0)
        report.add(Self.install("u2", keyword: "calm", at: 150))  // in the period, before its first midnight
        report.add(Self.install("u3", keyword: "calm", at: 86_400))
        let counted = report.rows.first { $0.keyword == "calm" }
        #expect(counted?.installs == 3 && counted?.installsInPeriod == 1)
        var timeless = KeywordReport()
        timeless.add(Self.install("u1", keyword: "calm", at: 0))
        #expect(timeless.rows.first?.installsInPeriod == nil)
    }
}

extension KeywordReportTests {
    @Test func theSameRecordsInAnyOrderGiveTheSameReport() {
        var records: [AttributionRecord] = []
        for index in 0..<30 {
            var install = Self.install(
                "u\(index)", keyword: index.isMultiple(of: 3) ? nil : "k\(index % 4)", at: Double(index))
            if index.isMultiple(of: 5) { install.keyword = nil }  // some routed before their names came
            if !index.isMultiple(of: 3) { install.keywordID = Int64(index % 4) }
            records.append(install)
            if index.isMultiple(of: 2) { records.append(Self.purchase("u\(index)", "t\(index)", "1.00")) }
            // The same transaction under another user id, with another amount.
            if index.isMultiple(of: 4) { records.append(Self.purchase("backend-\(index)", "t\(index)", "2.00")) }
        }
        var reference = KeywordReport()
        records.forEach { reference.add($0) }
        for _ in 0..<10 {
            var shuffled = KeywordReport()
            records.shuffled().forEach { shuffled.add($0) }
            #expect(shuffled.rows == reference.rows)
        }
    }
}

/// One purchase, however many records and user ids tell of it; installs Apple never
/// answered for; when a purchase was made.
extension KeywordReportTests {
    @Test func aTransactionFromTheSDKAndFromTheBackendCountsOnceForTheAttributedUser() {
        // The ASA SDK's user 7 came through "calm"; the backend knows the same buyer as
        // user-42, posts the amount, and has no install record for that id.
        var sdkPurchase = Self.purchase("7", "2000000123", "0")
        sdkPurchase.revenue = nil
        sdkPurchase.currency = nil
        let records = [
            Self.install("7", keyword: "calm"), sdkPurchase, Self.purchase("user-42", "2000000123", "9.99"),
        ]
        for order in [records, records.reversed()] {
            var report = KeywordReport()
            order.forEach { report.add($0) }
            let rows = report.rows
            #expect(rows.count == 1, "\(rows)")
            let calm = rows.first { $0.keyword == "calm" }
            #expect(calm?.purchases == 1 && calm?.payingUsers == 1)
            #expect(calm?.revenue == ["USD": Decimal(string: "9.99")!])
        }
    }

    @Test func aRecordWithoutAnAmountNeverErasesTheAmountOfAnother() {
        var bare = Self.purchase("u1", "t1", "0")
        bare.revenue = nil
        bare.currency = nil
        let records = [Self.install("u1", keyword: "calm"), Self.purchase("u1", "t1", "4.99"), bare]
        for order in [records, records.reversed()] {
            var report = KeywordReport()
            order.forEach { report.add($0) }
            #expect(report.rows.first?.revenue == ["USD": Decimal(string: "4.99")!])
        }
    }

    @Test func anInstallAppleNeverAnsweredForIsUnknownNotOrganic() {
        var report = KeywordReport()
        for (user, resolution) in [("lost", Resolution.notFound), ("refused", .invalid), ("waiting", .pending)] {
            var install = Self.install(user, keyword: nil)
            install.resolution = resolution
            report.add(install)
        }
        report.add(Self.install("answered", keyword: nil))
        // An answer that came later, on a second token, says more than none.
        var first = Self.install("later", keyword: nil, at: 0)
        first.resolution = .notFound
        report.add(first)
        report.add(Self.install("later", keyword: nil, at: 60))
        let rows = report.rows
        #expect(rows.first { $0.network == "unknown" }?.installs == 3)
        #expect(rows.first { $0.network == "organic" }?.installs == 2)
    }

    @Test func purchasesAreFilteredByWhenTheyWereMadeNotWhenTheyArrived() {
        var report = KeywordReport(
            purchasesSince: Self.start.addingTimeInterval(100), purchasesUntil: Self.start.addingTimeInterval(200))
        report.add(Self.install("u1", keyword: "calm"))
        // Made before the period, posted during it.
        var late = Self.purchase("u1", "t0", "1.00")
        late.purchaseDate = Self.start
        late.receivedAt = Self.start.addingTimeInterval(150)
        report.add(late)
        // Made during the period, posted after it.
        var inPeriod = Self.purchase("u1", "t1", "2.00")
        inPeriod.purchaseDate = Self.start.addingTimeInterval(199)
        inPeriod.receivedAt = Self.start.addingTimeInterval(500)
        report.add(inPeriod)
        // Received at the period's end, no time of its own: after it.
        var after = Self.purchase("u1", "t2", "4.00")
        after.receivedAt = Self.start.addingTimeInterval(200)
        report.add(after)
        #expect(report.rows.first { $0.keyword == "calm" }?.revenue == ["USD": 2])
    }

    @Test func aTestUsersPurchasesAreLeftOutWithTheirInstall() {
        var report = KeywordReport()
        var test = Self.install("tester", keyword: "calm")
        test.isTest = true
        report.add(test)
        report.add(Self.purchase("tester", "t1", "9.99"))
        #expect(report.rows.isEmpty)

        // The ASA SDK's test user bought, and the backend posted the same transaction after
        // it, and a renewal, under its own user id: one tester, read in any order, left out.
        var sdkPurchase = Self.purchase("7", "t2", "9.99")
        sdkPurchase.isTest = true
        var sdkInstall = Self.install("7", keyword: "calm")
        sdkInstall.isTest = true
        var backendCopy = Self.purchase("user-42", "t2", "9.99")
        backendCopy.receivedAt = Self.start.addingTimeInterval(5)
        let records = [sdkInstall, sdkPurchase, backendCopy, Self.purchase("user-42", "t3", "9.99")]
        for order in [records, records.reversed()] {
            var report = KeywordReport()
            order.forEach { report.add($0) }
            #expect(report.rows.isEmpty, "\(report.rows)")
        }
        // A test purchase alone (its install not stored) is left out with its buyer too.
        var alone = KeywordReport()
        [sdkPurchase, backendCopy].forEach { alone.add($0) }
        #expect(alone.rows.isEmpty, "\(alone.rows)")

        // Anyone can get Apple's test answer from a device in developer mode: a tester
        // claiming a buyer's transaction after the buyer's own record takes nothing from
        // the buyer (their install, that purchase and their others stay).
        var buyerInstall = Self.install("buyer", keyword: "calm")
        buyerInstall.receivedAt = Self.start.addingTimeInterval(-60)
        var stolen = Self.purchase("7", "t9", "49.99")
        stolen.isTest = true
        stolen.receivedAt = Self.start.addingTimeInterval(60)
        let attack = [
            sdkInstall, buyerInstall, Self.purchase("buyer", "t9", "49.99"), stolen,
            Self.purchase("buyer", "t10", "1.00"),
        ]
        for order in [attack, attack.reversed()] {
            var report = KeywordReport()
            order.forEach { report.add($0) }
            let calm = report.rows.first { $0.keyword == "calm" }
            #expect(calm?.installs == 1 && calm?.payingUsers == 1 && calm?.purchases == 2, "\(report.rows)")
            #expect(calm?.revenue == ["USD": Decimal(string: "50.99")!])
        }
    }

    @Test func aPurchaseWithoutAUserIDIsItsDevicesAndOneWithNeitherStillCounts() {
        let idfv = "6D92078A-8246-4BA4-AE5B-76104861E7DC"
        var install = Self.install("u1", keyword: "calm")
        install.idfv = idfv.lowercased()
        var byDevice = Self.purchase("u1", "t1", "4.99")
        byDevice.appUserID = nil
        byDevice.idfv = idfv
        var anonymous = Self.purchase("u1", "t2", "1.99")
        anonymous.appUserID = nil
        for order in [[install, byDevice, anonymous], [anonymous, byDevice, install]] {
            var report = KeywordReport()
            order.forEach { report.add($0) }
            let rows = report.rows
            let calm = rows.first { $0.keyword == "calm" }
            #expect(calm?.payingUsers == 1 && calm?.revenue == ["USD": Decimal(string: "4.99")!])
            let unattributed = rows.first { $0.network == "unattributed" }
            #expect(unattributed?.purchases == 1 && unattributed?.revenue == ["USD": Decimal(string: "1.99")!])
        }
    }

    @Test func aPurchaseMadeBeforeTheUserMetTheAdIsNotTheAds() {
        var report = KeywordReport()
        report.add(Self.install("u1", keyword: nil, at: 0))  // organic
        var before = Self.purchase("u1", "t1", "49.99")
        before.purchaseDate = Self.start.addingTimeInterval(100)
        report.add(before)
        let months: TimeInterval = 90 * 86400
        report.add(Self.install("u1", keyword: "calm", at: months))  // a redownload through an ad
        var after = Self.purchase("u1", "t2", "9.99")
        after.purchaseDate = Self.start.addingTimeInterval(months + 600)
        report.add(after)
        let rows = report.rows
        let calm = rows.first { $0.keyword == "calm" }
        #expect(calm?.installs == 1 && calm?.purchases == 1 && calm?.revenue == ["USD": Decimal(string: "9.99")!])
        let organic = rows.first { $0.network == "organic" }
        #expect(
            organic?.installs == 0 && organic?.purchases == 1 && organic?.revenue == ["USD": Decimal(string: "49.99")!])
    }

    /// A purchase made long before the user's only install (a user from before the gateway
    /// kept records, back through an ad) is no ad's; one made within the hour before the
    /// install is, as attribution arrives after the install it describes.
    @Test func aPurchaseBeforeTheUsersOnlyInstallIsUnattributedBeyondAnHour() {
        var report = KeywordReport()
        let months: TimeInterval = 60 * 86400
        report.add(Self.purchase("u1", "t1", "499.99"))
        report.add(Self.install("u1", keyword: "calm", at: months))
        var justBefore = Self.purchase("u2", "t2", "9.99")
        justBefore.purchaseDate = Self.start.addingTimeInterval(months - 1800)
        report.add(justBefore)
        report.add(Self.install("u2", keyword: "calm", at: months))
        let rows = report.rows
        let calm = rows.first { $0.keyword == "calm" }
        #expect(calm?.installs == 2 && calm?.payingUsers == 1)
        #expect(calm?.revenue == ["USD": Decimal(string: "9.99")!])
        let unattributed = rows.first { $0.network == "unattributed" }
        #expect(unattributed?.revenue == ["USD": Decimal(string: "499.99")!] && unattributed?.installs == 0)
    }

    /// A keyword's spend goes to the line of the campaign it ran in: an install posted with
    /// the keyword's id and a made-up campaign gets none of it, and a keyword whose only line
    /// names another campaign shows its spend on a line of its own.
    @Test func spendGoesOnlyToTheLineOfItsOwnCampaign() {
        func line(campaign: Int64?, keyword: Int64, installs: Int) -> KeywordReport.Row {
            var row = KeywordReport.emptyRow
            (row.appID, row.network, row.campaignID, row.keywordID) = ("1", "Apple Search Ads", campaign, keyword)
            row.installs = installs
            return row
        }
        let rows = [
            line(campaign: 7777, keyword: 7, installs: 1), line(campaign: 1, keyword: 7, installs: 3),
            line(campaign: nil, keyword: 8, installs: 2), line(campaign: 9, keyword: 9, installs: 1),
            line(campaign: 7777, keyword: 10, installs: 3), line(campaign: 1, keyword: 10, installs: 1),
        ]
        let spend: [Int64: KeywordSpend] = [
            7: KeywordSpend(campaignID: 1, amounts: ["USD": 30]), 8: KeywordSpend(campaignID: 2, amounts: ["USD": 8]),
            9: KeywordSpend(campaignID: 3, amounts: ["USD": 5]),
            // An export without campaigns: either line of keyword 10 could be the made-up one.
            10: KeywordSpend(amounts: ["USD": 6]),
        ]
        let priced = KeywordReport.spending(rows, spend)
        // The spend no line may take comes after the lines, by app (none known first).
        #expect(priced.map(\.spend) == [nil, ["USD": 30], ["USD": 8], nil, nil, nil, ["USD": 5], ["USD": 6]])
        #expect(priced[1].costPerInstall == ["USD": 10])
        #expect(priced[6].campaignID == 3 && priced[6].keywordID == 9 && priced[6].installs == 0)
        // The tied lines' app is that of the spend's own line, so the app's report shows it.
        #expect(priced[7].campaignID == nil && priced[7].keywordID == 10 && priced[7].appID == "1")
        // Lines alike but for their app tie too: a key of one app posting under another.
        var otherApp = line(campaign: 1, keyword: 7, installs: 5)
        otherApp.appID = "2"
        let forged = KeywordReport.spending([otherApp, line(campaign: 1, keyword: 7, installs: 1)], [7: spend[7]!])
        #expect(forged.prefix(2).allSatisfy { $0.spend == nil } && forged.last?.spend == ["USD": 30])
        // Its line is no app's, not the campaign's first line's (the forged app's here).
        #expect(forged.last?.appID == "")
    }

    /// A campaign's cost per install and ROAS divide by its keywords' installs and revenue in
    /// each currency of spend: its Search Match installs, which Apple's keyword report
    /// pays nothing for, and another currency's keywords do not dilute them.
    @Test func summedLinesPriceOnlyTheLinesWithSpendInEachCurrency() {
        func line(_ keyword: Int64?, installs: Int, revenue: Decimal, spend: [String: Decimal]?) -> KeywordReport.Row {
            var row = KeywordReport.emptyRow
            (row.appID, row.network, row.campaignID, row.keywordID) = ("1", "Apple Search Ads", 1, keyword)
            (row.installs, row.payingUsers, row.purchases, row.revenue) = (installs, 1, 1, ["USD": revenue])
            row.spend = spend
            row.price()
            return row
        }
        var campaign = KeywordReport.emptyRow
        campaign.add(line(7, installs: 10, revenue: 50, spend: ["USD": 100]))
        campaign.add(line(nil, installs: 5, revenue: 30, spend: nil))  // Search Match
        campaign.add(line(8, installs: 4, revenue: 0, spend: ["EUR": 40]))
        #expect(campaign.installs == 19 && campaign.spend == ["USD": 100, "EUR": 40])
        #expect(campaign.costPerInstall == ["USD": 10, "EUR": 10])
        #expect(campaign.costPerPayingUser == ["USD": 100, "EUR": 40])
        #expect(campaign.roas == ["USD": Decimal(string: "0.5")!])
        // A single line is priced on its own counts.
        #expect(line(7, installs: 10, revenue: 50, spend: ["USD": 100]).costPerInstall == ["USD": 10])
    }

    /// Scenarios: a device's install joins its user's purchases, one device is one
    /// install, the backend's renewals follow the SDK user they were merged with, and a
    /// test device's purchases stay out.
    @Test func aUsersDevicesAndOtherUserIDsAreOnePerson() {
        let idfv = "6D92078A-8246-4BA4-AE5B-76104861E7DC"
        // A vendor's callback names only the device; AdServices answered organic for u1
        // on that device; the backend's purchase names both.
        var callback = Self.install("ignored", keyword: "calm", provider: "s2s")
        callback.appUserID = nil
        callback.idfv = idfv
        var organic = Self.install("u1", keyword: nil, at: 30)
        organic.idfv = idfv
        var purchase = Self.purchase("u1", "t1", "9.99")
        purchase.idfv = idfv
        purchase.purchaseDate = Self.start.addingTimeInterval(600)
        // The SDK's user 7 (through "calm") and the backend's user-42: one purchase, then
        // a renewal the backend alone reports.
        var sdk = Self.purchase("7", "1000", "0")
        sdk.revenue = nil
        sdk.currency = nil
        let records = [
            callback, organic, purchase, Self.install("7", keyword: "calm"), sdk,
            Self.purchase("user-42", "1000", "4.99"), Self.purchase("user-42", "1001", "4.99"),
        ]
        for order in [records, records.reversed()] {
            var report = KeywordReport()
            order.forEach { report.add($0) }
            let rows = report.rows
            let calm = rows.first { $0.keyword == "calm" }
            #expect(calm?.installs == 2, "\(rows)")
            #expect(calm?.payingUsers == 2 && calm?.purchases == 3)
            #expect(calm?.revenue == ["USD": Decimal(string: "19.97")!])
            #expect(rows.count == 1, "\(rows)")
        }

        // A test install under the device alone keeps its user's purchases out.
        var test = Self.install("ignored", keyword: "calm")
        test.appUserID = nil
        test.idfv = idfv
        test.isTest = true
        var devicePurchase = Self.purchase("x", "t9", "5.00")
        devicePurchase.appUserID = nil
        devicePurchase.idfv = idfv
        var tie = Self.install("u9", keyword: nil)
        tie.idfv = idfv
        var report = KeywordReport()
        [test, devicePurchase, tie, Self.purchase("u9", "t10", "1.00")].forEach { report.add($0) }
        #expect(report.rows.isEmpty, "\(report.rows)")
    }
}

extension KeywordReportTests {
    /// A user organic at first, who bought, then came back through a keyword and bought
    /// again, is paying on both lines but installed on the keyword's: the organic line's
    /// conversion counts only its own installs, and never passes 100%.
    @Test func conversionCountsOnlyTheLinesOwnInstalls() {
        var report = KeywordReport()
        report.add(Self.install("u1", keyword: nil, at: 0))
        var early = Self.purchase("u1", "t1", "1.00")
        early.receivedAt = Self.start.addingTimeInterval(100)
        report.add(early)
        report.add(Self.install("u1", keyword: "calm", at: 200 * 86_400))
        var later = Self.purchase("u1", "t2", "2.00")
        later.receivedAt = Self.start.addingTimeInterval(201 * 86_400)
        report.add(later)
        report.add(Self.install("u2", keyword: nil, at: 10))

        let rows = report.rows
        let organic = rows.first { $0.keyword == nil && $0.network != "unattributed" }
        let calm = rows.first { $0.keyword == "calm" }
        #expect(organic?.installs == 1 && organic?.payingUsers == 1 && organic?.convertedInstalls == 0)
        #expect(calm?.installs == 1 && calm?.payingUsers == 1 && calm?.convertedInstalls == 1)
    }
}

extension KeywordReportTests {
    /// Records stored under an earlier rule may carry the all-zero IDFV (an unset
    /// `identifierForVendor`): it names no device, so it joins nobody.
    @Test func theAllZeroIDFVJoinsNobody() {
        var report = KeywordReport()
        for (user, keyword) in [("z1", "calm"), ("z2", "sleep")] {
            var install = Self.install(user, keyword: keyword)
            install.keywordID = keyword == "calm" ? 13 : 23
            install.idfv = "00000000-0000-0000-0000-000000000000"
            report.add(install)
        }
        report.add(Self.purchase("z2", "t2", "50.00"))
        let rows = report.rows
        #expect(rows.first { $0.keyword == "calm" }.map { [$0.installs, $0.payingUsers] } == [1, 0])
        #expect(rows.first { $0.keyword == "sleep" }.map { [$0.installs, $0.payingUsers] } == [1, 1])
    }
}

extension KeywordReportTests {
    /// Lines are per app: two apps' organic users, or their campaigns of one name, are
    /// not summed together.
    @Test func eachAppHasItsOwnLines() {
        var report = KeywordReport()
        report.add(Self.install("u", keyword: nil, app: "1"))
        report.add(Self.install("v", keyword: nil, app: "2"))
        report.add(Self.install("w", keyword: "calm", app: "2"))
        report.add(Self.purchase("v", "t", "3.00", app: "2"))
        let organic = report.rows.filter { $0.keyword == nil }
        #expect(organic.map(\.appID).sorted() == ["1", "2"])
        #expect(organic.allSatisfy { $0.installs == 1 })
        #expect(organic.first { $0.appID == "2" }?.payingUsers == 1)
        #expect(report.rows.first { $0.keyword == "calm" }?.appID == "2")
    }
}
