import Foundation
import GatewayCore
import Testing

/// The hand-written record JSON (storage, the SQLite sink) says what `JSONEncoder` says:
/// the same fields and values, read back into the same record.
@Suite struct RecordJSONTests {
    static func record(text: String) -> AttributionRecord {
        var record = AttributionRecord(
            provider: "skadnetwork", kind: .postback, dedupeKey: "skan:\(text):0",
            receivedAt: Date(timeIntervalSince1970: 1_700_000_000.123), attributed: true)
        record.appID = "1234567890"
        record.appUserID = text
        record.attStatus = 3
        record.network = "Apple Search Ads"
        record.campaignID = Int64.max
        record.keywordID = -1
        record.keyword = text
        record.clickDate = Date(timeIntervalSince1970: 1_600_000_000)
        record.fineValue = 63
        record.didWin = false
        record.events = ["session", text, ""]
        record.revenue = Decimal(string: "9.99")
        record.revenueMin = Decimal(string: "0.001")
        record.revenueMax = Decimal(string: "123456789.5")
        record.raw = .object([
            "b": .array([.null, .bool(true), .integer(-7), .double(0.1), .double(1e-7), .double(2.5e20)]),
            "a": .object(["z": .string(text), "y": .object([:])]), "/path": .string("a/b"),
        ])
        return record
    }

    static let awkward = [
        "plain", "quote \" and backslash \\", "line\nfeed\ttab\r\u{8}\u{c}", "control \u{1}\u{1f}", "slash / here",
        "unicode é 日本 🎉", "",
    ]

    @Test(arguments: awkward)
    func writtenJSONMatchesTheEncoderAndReadsBack(text: String) throws {
        let record = Self.record(text: text)
        let written = record.jsonData()
        let encoded = try AttributionRecord.makeEncoder().encode(record)
        #expect(try JSONValue.parse(written) == JSONValue.parse(encoded))
        #expect(try AttributionRecord.makeDecoder().decode(AttributionRecord.self, from: written) == record)
        #expect(try AttributionRecord(jsonData: written) == record)
        #expect(try AttributionRecord(jsonData: AttributionRecord.makeEncoder().encode(record)) == record)
        // Keys come out sorted, as the encoder sorts them.
        let keys = try #require(try JSONSerialization.jsonObject(with: written) as? [String: Any]).keys.sorted()
        let order = AttributionRecord.fieldNames.filter(keys.contains)
        #expect(order == keys)
    }

    @Test(arguments: awkward)
    func embeddedJSONTextIsWhatItsFieldEncodesTo(text: String) throws {
        // A sink row takes `raw` and `events` from the stored JSON instead of encoding them
        // again: the slice must be exactly that encoding.
        let record = Self.record(text: text)
        let encoded = record.encoded()
        #expect(Data(encoded.json) == record.jsonData())
        #expect(encoded.jsonText(of: "raw") == AttributionRecord.jsonText(.json(try #require(record.raw))))
        #expect(encoded.jsonText(of: "events") == AttributionRecord.jsonText(.strings(try #require(record.events))))
        #expect(encoded.jsonText(of: "keyword") == nil)
        #expect(encoded.jsonText(of: "signature") == nil)
    }

    @Test func everyCodingKeyIsAField() throws {
        // A field added to the record but not to the field table would vanish from storage.
        var record = Self.record(text: "x")
        record.idfv = "v"; record.idfa = "i"; record.duplicateOf = "d"; record.orgID = 1; record.orgName = "o"
        record.campaignName = "c"; record.adGroupID = 1; record.adGroupName = "g"; record.keywordMatchType = "Exact"
        record.adID = 1; record.creativeSetID = 1; record.creativeSetName = "s"; record.countryOrRegion = "US"
        record.conversionType = "Download"; record.claimType = "Click"; record.supplyPlacement = "p"
        let moment = Date(timeIntervalSince1970: 1_700_000_000.5)
        record.impressionDate = moment; record.conversionDate = moment; record.purchaseDate = moment
        record.skanVersion = "4.0"; record.adNetworkID = "n"; record.transactionID = "t"; record.sourceAppID = "a"
        record.sourceIdentifier = "1"; record.sourceDomain = "d"; record.coarseValue = "low"
        record.postbackSequenceIndex = 0; record.fidelityType = 1; record.redownload = true;
        record.signature = "verified"
        record.eventName = "e"; record.currency = "USD"; record.transactionRef = "r"; record.vendorIDs = ["adid": "x"]
        record.enrichedAt = moment
        let unset = Mirror(reflecting: record).children.filter { "\($0.value)" == "nil" }.compactMap(\.label)
        #expect(unset.isEmpty, "set every field here: \(unset)")
        let encoded = try #require(
            try JSONSerialization.jsonObject(with: AttributionRecord.makeEncoder().encode(record)) as? [String: Any])
        #expect(Set(encoded.keys) == Set(AttributionRecord.fieldNames))
        #expect(
            try JSONValue.parse(record.jsonData()) == JSONValue.parse(AttributionRecord.makeEncoder().encode(record)))
        // And every field is read back.
        #expect(try AttributionRecord(jsonData: record.jsonData()) == record)
    }

    @Test(arguments: awkward)
    func aBodyUnderCodedKeysReadsBackAsTheSameRecord(text: String) throws {
        // PostgreSQL stores bodies under one-character codes; any reader takes either form.
        let record = Self.record(text: text)
        let coded = record.encoded(codedKeys: true)
        let keys = try #require(try JSONSerialization.jsonObject(with: Data(coded.json)) as? [String: Any]).keys
        #expect(keys.allSatisfy { $0.count == 1 })
        #expect(try AttributionRecord(jsonData: Data(coded.json)) == record)
        #expect(coded.namedCount == record.jsonData().count)
        #expect(coded.jsonText(of: "raw") == record.encoded().jsonText(of: "raw"))
    }

    @Test func everyFieldHasItsOwnCodeAndNoCodeIsAName() {
        let fields = AttributionRecord.fieldNames
        let codes = fields.map { StoredKey.code(of: $0) }
        #expect(codes.allSatisfy { $0.count == 1 })
        #expect(Set(codes).count == fields.count)
        #expect(Set(codes).isDisjoint(with: fields))
        #expect(fields.allSatisfy { StoredKey.name(of: StoredKey.code(of: $0)) == $0 })
    }

    @Test func aBodyThatIsNotARecordIsRefusedNamingTheField() {
        for body in [
            #"[]"#, #"{"provider":"iad"}"#,
            #"{"record_id":"r","received_at":"2020-01-01T00:00:00Z","provider":"p","kind":"install","resolution":"resolved","dedupe_key":"d","attributed":"yes"}"#,
        ] {
            #expect(throws: AttributionRecord.NotARecord.self) { try AttributionRecord(jsonData: Data(body.utf8)) }
        }
    }
}
