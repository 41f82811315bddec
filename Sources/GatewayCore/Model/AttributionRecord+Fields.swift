import Foundation

/// The record as a list of named values: one table that the JSON writer and the SQLite
/// sink's columns both read, so neither goes through `JSONEncoder` (whose per-field
/// dynamic dispatch and key sorting led the ingest profile).
extension AttributionRecord {
    /// One field's value as JSON knows it.
    public enum FieldValue: Sendable, Equatable {
        case string(String)
        case integer(Int64)
        case bool(Bool)
        case decimal(Decimal)
        case date(Date)
        case json(JSONValue)
        case strings([String])

        /// The value as the record's reader takes it from a body, for a text, an integer or
        /// a boolean.
        var scalarJSON: JSONValue? {
            switch self {
            case .string(let text): .string(text)
            case .integer(let number): .integer(number)
            case .bool(let flag): .bool(flag)
            default: nil
            }
        }
    }

    typealias FieldReader = @Sendable (AttributionRecord) -> FieldValue?

    /// One field of the record, as the JSON writer and the stores read it.
    struct Field: Sendable {
        let name: String, code: String, read: FieldReader, apart: Bool, codedApart: Bool
        /// The value a body under codes leaves out (``EncodedRecord/codedDefaults``), and
        /// what the field would take in a body under its name: a comma, the quoted name, a
        /// colon and the value.
        let codedDefault: (value: FieldValue, namedSize: Int)?
    }

    /// Every field by its JSON name, sorted as `JSONEncoder`'s `.sortedKeys` sorts them, and
    /// whether stores keep it apart from the body (``EncodedRecord/keptApart``), decided
    /// once here rather than for every field of every record encoded.
    static let fieldReaders: [Field] = {
        @Sendable func s(_ v: String?) -> FieldValue? { v.map(FieldValue.string) }
        @Sendable func i(_ v: Int64?) -> FieldValue? { v.map(FieldValue.integer) }
        @Sendable func n(_ v: Int?) -> FieldValue? { v.map { .integer(Int64($0)) } }
        @Sendable func b(_ v: Bool?) -> FieldValue? { v.map(FieldValue.bool) }
        @Sendable func d(_ v: Date?) -> FieldValue? { v.map(FieldValue.date) }
        @Sendable func m(_ v: Decimal?) -> FieldValue? { v.map(FieldValue.decimal) }
        let readers: [(String, FieldReader)] = [
            ("record_id", { .string($0.recordID) }), ("received_at", { .date($0.receivedAt) }),
            ("provider", { .string($0.provider) }), ("app_id", { s($0.appID) }),
            ("app_user_id", { s($0.appUserID) }),
            ("idfv", { s($0.idfv) }), ("idfa", { s($0.idfa) }), ("att_status", { n($0.attStatus) }),
            ("attributed", { .bool($0.attributed) }), ("kind", { .string($0.kind.rawValue) }),
            ("resolution", { .string($0.resolution.rawValue) }), ("is_test", { .bool($0.isTest) }),
            ("duplicate_of", { s($0.duplicateOf) }), ("network", { s($0.network) }),
            ("org_id", { i($0.orgID) }), ("org_name", { s($0.orgName) }), ("campaign_id", { i($0.campaignID) }),
            ("campaign_name", { s($0.campaignName) }), ("ad_group_id", { i($0.adGroupID) }),
            ("ad_group_name", { s($0.adGroupName) }), ("keyword_id", { i($0.keywordID) }),
            ("keyword", { s($0.keyword) }),
            ("keyword_match_type", { s($0.keywordMatchType) }), ("ad_id", { i($0.adID) }),
            ("creative_set_id", { i($0.creativeSetID) }), ("creative_set_name", { s($0.creativeSetName) }),
            ("country_or_region", { s($0.countryOrRegion) }), ("conversion_type", { s($0.conversionType) }),
            ("claim_type", { s($0.claimType) }), ("supply_placement", { s($0.supplyPlacement) }),
            ("click_date", { d($0.clickDate) }), ("impression_date", { d($0.impressionDate) }),
            ("conversion_date", { d($0.conversionDate) }), ("purchase_date", { d($0.purchaseDate) }),
            ("skan_version", { s($0.skanVersion) }), ("ad_network_id", { s($0.adNetworkID) }),
            ("transaction_id", { s($0.transactionID) }), ("source_app_id", { s($0.sourceAppID) }),
            ("source_identifier", { s($0.sourceIdentifier) }), ("source_domain", { s($0.sourceDomain) }),
            ("fine_value", { n($0.fineValue) }), ("coarse_value", { s($0.coarseValue) }),
            ("postback_sequence_index", { n($0.postbackSequenceIndex) }), ("did_win", { b($0.didWin) }),
            ("fidelity_type", { n($0.fidelityType) }), ("redownload", { b($0.redownload) }),
            ("signature", { s($0.signature) }), ("events", { $0.events.map(FieldValue.strings) }),
            ("revenue_min", { m($0.revenueMin) }), ("revenue_max", { m($0.revenueMax) }),
            ("event_name", { s($0.eventName) }), ("revenue", { m($0.revenue) }), ("currency", { s($0.currency) }),
            ("transaction_ref", { s($0.transactionRef) }),
            ("vendor_ids", { $0.vendorIDs.map { .json(.object($0.mapValues(JSONValue.string))) } }),
            ("raw", { $0.raw.map(FieldValue.json) }),
            ("dedupe_key", { .string($0.dedupeKey) }), ("enriched_at", { d($0.enrichedAt) }),
        ]
        return readers.sorted { $0.0 < $1.0 }.map { name, read in
            Field(
                name: name, code: StoredKey.code(of: name), read: read, apart: EncodedRecord.keptApart.contains(name),
                codedApart: EncodedRecord.keptApartWhenCoded.contains(name),
                codedDefault: EncodedRecord.codedDefaults[name].map {
                    ($0, name.utf8.count + 4 + jsonText($0).utf8.count)
                })
        }
    }()

    /// The JSON names of every field, sorted.
    public static var fieldNames: [String] { fieldReaders.map(\.name) }

    /// The fields that have a value, by JSON name, sorted.
    public var fields: [(name: String, value: FieldValue)] {
        Self.fieldReaders.compactMap { reader in reader.read(self).map { (reader.name, $0) } }
    }

    /// One field's value as JSON text.
    public static func jsonText(_ value: FieldValue) -> String {
        var out = JSONWriter()
        out.value(value)
        return String(decoding: out.bytes, as: UTF8.self)
    }

    /// The record's JSON, as ``makeEncoder()`` writes it (sorted keys, ISO-8601 dates,
    /// absent fields left out), without Codable.
    public func jsonData() -> Data {
        Data(encoded().json)
    }

    /// The record's JSON (as ``jsonData()``), remembering where each JSON-valued field's
    /// text lies in it, and where the fields of ``EncodedRecord/keptApart`` lie. With
    /// `codedKeys`, each field goes under its ``StoredKey`` code rather than its name, those
    /// of ``EncodedRecord/keptApartWhenCoded`` are the ones kept apart, and a field holding
    /// its value of ``EncodedRecord/codedDefaults`` is left out.
    public func encoded(codedKeys: Bool = false) -> EncodedRecord {
        var out = JSONWriter()
        var embedded: [(name: String, key: String, range: Range<Int>)] = []
        var apart: [Range<Int>] = []
        var codedBy = 0
        out.byte(UInt8(ascii: "{"))
        var first = true
        for reader in Self.fieldReaders {
            guard let value = reader.read(self) else { continue }
            if codedKeys, let fallback = reader.codedDefault, fallback.value == value {
                codedBy += fallback.namedSize
                continue
            }
            let field = out.bytes.count
            if !first { out.byte(UInt8(ascii: ",")) }
            first = false
            let key = codedKeys ? reader.code : reader.name
            codedBy += reader.name.utf8.count - key.utf8.count
            out.string(key)
            out.byte(UInt8(ascii: ":"))
            let start = out.bytes.count
            out.value(value)
            switch value {
            case .json, .strings: embedded.append((reader.name, key, start..<out.bytes.count))
            default: break
            }
            if codedKeys ? reader.codedApart : reader.apart { apart.append(field..<out.bytes.count) }
        }
        out.byte(UInt8(ascii: "}"))
        return EncodedRecord(json: out.bytes, embedded: embedded, apart: apart, namedCount: out.bytes.count + codedBy)
    }
}

/// A record's stored JSON, and where in it lies the text of each field whose value is
/// JSON itself (`raw`, `events`): a sink row takes that text instead of encoding the
/// value again, which was three fifths of making the SQLite sink's row.
public struct EncodedRecord: Sendable {
    /// The record's JSON, as ``AttributionRecord/jsonData()`` writes it.
    public let json: [UInt8]
    let embedded: [(name: String, key: String, range: Range<Int>)]
    /// Where each field of ``keptApart`` lies, its name and the comma before it included.
    let apart: [Range<Int>]
    /// The size of the JSON with every field under its name, which ``json`` has unless it
    /// was written with ``StoredKey`` codes.
    public let namedCount: Int

    /// The fields every store keeps in columns of their own (``StoredColumns``), left out
    /// of the stored body so that a record holds them once; the reader puts them back
    /// (``AttributionRecord/init(jsonData:keptApart:)``).
    public static let keptApart: Set<String> = ["app_id", "dedupe_key", "provider", "record_id"]

    /// What a store writing ``StoredKey`` codes (PostgreSQL) keeps apart: `received_at` too,
    /// whose column gives it to the millisecond, as the body's text did.
    public static let keptApartWhenCoded = keptApart.union(["received_at"])

    /// The values nearly every record has, which a body under codes leaves out and its
    /// reader gives back: the fields' 25 bytes were what kept an iAd row from packing one
    /// more to a PostgreSQL page.
    public static let codedDefaults: [String: AttributionRecord.FieldValue] = [
        "is_test": .bool(false), "resolution": .string(Resolution.resolved.rawValue),
    ]

    /// The JSON as text.
    public var text: String { String(decoding: json, as: UTF8.self) }

    /// The JSON text of the field `name` as the record's JSON has it, when that field's
    /// value is JSON (an object, an array, a list); nil otherwise.
    public func jsonText(of name: String) -> String? {
        embedded.first { $0.name == name }.map { String(decoding: json[$0.range], as: UTF8.self) }
    }

    /// The stored body: the JSON without the fields of ``keptApart`` and without the
    /// JSON-valued field `name`, with that field's JSON text (nil when the record has no
    /// value for it), cut from the text already written rather than encoded again. A field
    /// first in the record, which no JSON-valued field is, is left in place.
    public func storedBody(apartFrom name: String) -> (json: [UInt8], field: ArraySlice<UInt8>?) {
        let embedded = embedded.first { $0.name == name }
        let prefix = Array(",\"\(embedded?.key ?? name)\":".utf8)
        // A field first in the body has no comma before it: it takes the one after it, which
        // is there, as `attributed` always follows these.
        var cuts = apart.map { cut in
            cut.lowerBound == 1 && cut.upperBound < json.count && json[cut.upperBound] == UInt8(ascii: ",")
                ? cut.lowerBound..<(cut.upperBound + 1) : cut
        }
        var field: ArraySlice<UInt8>?
        if let range = embedded?.range,
            range.lowerBound >= prefix.count,
            json[(range.lowerBound - prefix.count)..<range.lowerBound].elementsEqual(prefix)
        {
            cuts.append((range.lowerBound - prefix.count)..<range.upperBound)
            field = json[range]
        }
        guard !cuts.isEmpty else { return (json, nil) }
        var rest: [UInt8] = []
        rest.reserveCapacity(json.count)
        var from = 0
        for cut in cuts.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            rest.append(contentsOf: json[from..<cut.lowerBound])
            from = cut.upperBound
        }
        rest.append(contentsOf: json[from...])
        return (rest, field)
    }
}

/// Writes JSON text byte by byte: strings escaped as JSONEncoder escapes them (quote,
/// backslash and control characters; `/` left alone), object keys sorted.
struct JSONWriter {
    var bytes: [UInt8] = []

    init() {
        bytes.reserveCapacity(1024)
    }

    mutating func byte(_ b: UInt8) {
        bytes.append(b)
    }

    mutating func raw(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        // Most strings need no escape: appended at once rather than byte by byte, scanned
        // as a buffer (iterating a String's UTF8View checks each index; it showed in the
        // profile of every route that stores a record).
        var text = text
        let plain = text.withUTF8 { utf8 in
            for b in utf8 where b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") { return false }
            bytes.append(contentsOf: utf8)
            return true
        }
        if plain {
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for b in text.utf8 {
            switch b {
            case UInt8(ascii: "\""): raw("\\\"")
            case UInt8(ascii: "\\"): raw("\\\\")
            case 0x0A: raw("\\n")
            case 0x0D: raw("\\r")
            case 0x09: raw("\\t")
            case 0x08: raw("\\b")
            case 0x0C: raw("\\f")
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                raw("\\u00")
                bytes.append(hex[Int(b >> 4)])
                bytes.append(hex[Int(b & 0x0F)])
            default: bytes.append(b)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    mutating func value(_ value: AttributionRecord.FieldValue) {
        switch value {
        case .string(let s): string(s)
        case .integer(let n): raw(String(n))
        case .bool(let b): raw(b ? "true" : "false")
        case .decimal(let d): raw(d.description)
        case .date(let date): string(ISO8601.format(date))
        case .json(let json): self.json(json)
        case .strings(let list):
            byte(UInt8(ascii: "["))
            for (index, item) in list.enumerated() {
                if index > 0 { byte(UInt8(ascii: ",")) }
                string(item)
            }
            byte(UInt8(ascii: "]"))
        }
    }

    mutating func json(_ value: JSONValue) {
        switch value {
        case .null: raw("null")
        case .bool(let b): raw(b ? "true" : "false")
        case .integer(let n): raw(String(n))
        case .double(let d): raw(d.isFinite ? "\(d)" : "null")
        case .string(let s): string(s)
        case .array(let items):
            byte(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { byte(UInt8(ascii: ",")) }
                json(item)
            }
            byte(UInt8(ascii: "]"))
        case .object(let object):
            byte(UInt8(ascii: "{"))
            for (index, member) in object.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { byte(UInt8(ascii: ",")) }
                string(member.key)
                byte(UInt8(ascii: ":"))
                json(member.value)
            }
            byte(UInt8(ascii: "}"))
        }
    }
}

extension AttributionRecord {
    /// Thrown by ``init(jsonData:)`` for a body that is not a stored record.
    public struct NotARecord: Error, CustomStringConvertible {
        public let description: String
    }

    /// Reads JSON written by ``jsonData()`` (or ``makeEncoder()``) without Codable: the
    /// store reads every record it hands to a sink this way.
    public init(jsonData data: Data) throws {
        try self.init(jsonData: data, keptApart: nil)
    }

    /// Reads a stored body, whose fields of ``EncodedRecord/keptApart`` come from the
    /// store's columns (`keptApart`) unless the body has them.
    public init(jsonData data: Data, keptApart: StoredColumns?) throws {
        // A stored record nests its payload inside `raw`, deeper than the body's limit
        // allowed: its own limit is Foundation's.
        guard case .object(let body) = try JSONParser.parse(data, maxDepth: 512) else {
            throw NotARecord(description: "not an object")
        }
        var o = StoredKey.named(body)
        if StoredKey.isCoded(body) {
            for (name, value) in EncodedRecord.codedDefaults where o[name] == nil { o[name] = value.scalarJSON }
        }
        func string(_ key: String) throws -> String? {
            switch o[key] {
            case nil, .null: return nil
            case .string(let s): return s
            default: throw NotARecord(description: "\(key) is not a string")
            }
        }
        func required(_ key: String) throws -> String {
            guard let s = try string(key) else { throw NotARecord(description: "\(key) is missing") }
            return s
        }
        func integer(_ key: String) throws -> Int64? {
            switch o[key] {
            case nil, .null: return nil
            case .integer(let n): return n
            default: throw NotARecord(description: "\(key) is not an integer")
            }
        }
        func int(_ key: String) throws -> Int? { try integer(key).map { Int($0) } }
        func bool(_ key: String) throws -> Bool? {
            switch o[key] {
            case nil, .null: return nil
            case .bool(let b): return b
            default: throw NotARecord(description: "\(key) is not a boolean")
            }
        }
        func date(_ key: String) throws -> Date? {
            guard let text = try string(key) else { return nil }
            guard let date = ISO8601.parse(text) else {
                throw NotARecord(description: "\(key) is not an ISO-8601 date")
            }
            return date
        }
        func decimal(_ key: String) throws -> Decimal? {
            switch o[key] {
            case nil, .null: return nil
            case .integer(let n): return Decimal(n)
            case .double(let d): return Decimal(string: String(d))
            default: throw NotARecord(description: "\(key) is not a number")
            }
        }
        guard let kind = RecordKind(rawValue: try required("kind")),
            let resolution = Resolution(rawValue: try required("resolution")),
            let receivedAt = try date("received_at") ?? keptApart?.receivedAt.map(ISO8601.milliseconds)
        else { throw NotARecord(description: "kind, resolution or received_at is missing or unknown") }
        self.init(
            provider: try string("provider") ?? keptApart?.provider ?? required("provider"), kind: kind,
            dedupeKey: try string("dedupe_key") ?? keptApart?.dedupeKey ?? required("dedupe_key"),
            receivedAt: receivedAt, attributed: try bool("attributed") ?? false, resolution: resolution,
            recordID: try string("record_id") ?? keptApart?.recordID ?? required("record_id"))
        isTest = try bool("is_test") ?? false
        appID = try string("app_id") ?? keptApart?.appID
        appUserID = try string("app_user_id")
        idfv = try string("idfv")
        idfa = try string("idfa")
        attStatus = try int("att_status")
        duplicateOf = try string("duplicate_of")
        network = try string("network")
        orgID = try integer("org_id")
        orgName = try string("org_name")
        campaignID = try integer("campaign_id")
        campaignName = try string("campaign_name")
        adGroupID = try integer("ad_group_id")
        adGroupName = try string("ad_group_name")
        keywordID = try integer("keyword_id")
        keyword = try string("keyword")
        keywordMatchType = try string("keyword_match_type")
        adID = try integer("ad_id")
        creativeSetID = try integer("creative_set_id")
        creativeSetName = try string("creative_set_name")
        countryOrRegion = try string("country_or_region")
        conversionType = try string("conversion_type")
        claimType = try string("claim_type")
        supplyPlacement = try string("supply_placement")
        clickDate = try date("click_date")
        impressionDate = try date("impression_date")
        conversionDate = try date("conversion_date")
        purchaseDate = try date("purchase_date")
        skanVersion = try string("skan_version")
        adNetworkID = try string("ad_network_id")
        transactionID = try string("transaction_id")
        sourceAppID = try string("source_app_id")
        sourceIdentifier = try string("source_identifier")
        sourceDomain = try string("source_domain")
        fineValue = try int("fine_value")
        coarseValue = try string("coarse_value")
        postbackSequenceIndex = try int("postback_sequence_index")
        didWin = try bool("did_win")
        fidelityType = try int("fidelity_type")
        redownload = try bool("redownload")
        signature = try string("signature")
        switch o["events"] {
        case nil, .null: events = nil
        case .array(let items):
            events = try items.map { item in
                guard case .string(let s) = item else { throw NotARecord(description: "events holds a non-string") }
                return s
            }
        default: throw NotARecord(description: "events is not a list")
        }
        revenueMin = try decimal("revenue_min")
        revenueMax = try decimal("revenue_max")
        eventName = try string("event_name")
        revenue = try decimal("revenue")
        currency = try string("currency")
        transactionRef = try string("transaction_ref")
        switch o["vendor_ids"] {
        case nil, .null: vendorIDs = nil
        case .object(let ids):
            vendorIDs = try ids.mapValues { id in
                guard case .string(let s) = id else { throw NotARecord(description: "vendor_ids holds a non-string") }
                return s
            }
        default: throw NotARecord(description: "vendor_ids is not an object")
        }
        raw = o["raw"].flatMap { $0 == .null ? nil : $0 }
        enrichedAt = try date("enriched_at")
    }
}

/// The fields of a record a store keeps in columns of their own and leaves out of its
/// stored body (``EncodedRecord/keptApart``), as read back from those columns.
public struct StoredColumns: Sendable {
    public var recordID: String
    public var dedupeKey: String
    public var provider: String
    public var appID: String?
    /// `received_at` in seconds since 1970, for a body that leaves it out
    /// (``EncodedRecord/keptApartWhenCoded``).
    public var receivedAt: Double?

    public init(recordID: String, dedupeKey: String, provider: String, appID: String?, receivedAt: Double? = nil) {
        self.recordID = recordID
        self.dedupeKey = dedupeKey
        self.provider = provider
        self.appID = appID
        self.receivedAt = receivedAt
    }

    /// The `records` columns a store reads a record from, for a statement's select list:
    /// these fields, then the stored body and its compressed payload. `table` qualifies
    /// each where a statement joins other tables.
    public static func selectList(of table: String? = nil) -> String {
        ["record_id", "dedupe_key", "provider", "app_id", "received_at", "body", "raw"].map { column in
            table.map { "\($0).\(column)" } ?? column
        }.joined(separator: ", ")
    }
}
