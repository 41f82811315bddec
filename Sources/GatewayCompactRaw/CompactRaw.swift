import CZlib
import Foundation
import GatewayCore

/// How the stores keep a record's raw payload: beside its body rather than inside it, as
/// deflated bytes behind a one-byte format tag.
///
/// Payloads are small JSON objects whose keys repeat from one record to the next, which
/// deflate alone barely shrinks; a preset dictionary of those keys does the work. The
/// record's stored body joins that dictionary: it holds the values the payload was read
/// into (ids, names, dates), so the payload costs little beyond what the body already
/// says. The payload is therefore packed again whenever its body changes. The dictionary
/// of a tag never changes once stored rows use it: a new one takes a new tag.
public enum CompactRaw {
    /// The stored value for a payload's JSON text, kept beside the stored `body`.
    public static func pack(_ json: some Collection<UInt8>, beside body: some Collection<UInt8>) -> [UInt8] {
        let input = Array(json)
        if let deflated = deflate(input, dictionary: dictionaryV1 + body) {
            return [Tag.deflatedBesideBody] + checksum(input) + deflated
        }
        return [Tag.plain] + input
    }

    /// The payload's JSON text back from a stored value and the stored `body` it was packed beside.
    public static func unpackText(_ stored: some Collection<UInt8>, beside body: some Collection<UInt8>) throws
        -> [UInt8]
    {
        guard let tag = stored.first else { throw Unreadable(description: "the stored raw payload is empty") }
        let packed = Array(stored.dropFirst())
        switch tag {
        case Tag.plain: return packed
        case Tag.deflatedV1: return try inflate(packed, dictionary: dictionaryV1)
        case Tag.deflatedBesideBody:
            // Inflated against another body (one changed in the database by hand), the bytes
            // are wrong rather than unreadable, and may still be JSON: the checksum tells.
            guard packed.count >= 4 else { throw Unreadable(description: "the stored raw payload is cut short") }
            let text = try inflate(Array(packed.dropFirst(4)), dictionary: dictionaryV1 + body)
            guard checksum(text) == Array(packed.prefix(4)) else {
                throw Unreadable(description: "the stored raw payload does not match its body, which was changed")
            }
            return text
        default: throw Unreadable(description: "the stored raw payload has an unknown format (\(tag))")
        }
    }

    /// Thrown for a stored value this version cannot read.
    public struct Unreadable: Error, CustomStringConvertible {
        public let description: String
    }

    enum Tag {
        static let plain: UInt8 = 0
        /// ``dictionaryV1`` alone.
        static let deflatedV1: UInt8 = 1
        /// The payload's CRC-32 (4 bytes, big-endian), then deflate with ``dictionaryV1``
        /// followed by the record's stored body.
        static let deflatedBesideBody: UInt8 = 2
    }

    /// The keys and common values of the payloads the built-in providers receive (iAd's
    /// `Version3.1`, AdServices answers, SKAN postbacks, S2S events), most common last,
    /// where deflate looks first. Fixed for ``Tag/deflatedV1`` and ``Tag/deflatedBesideBody``.
    static let dictionaryV1 = Array(
        """
        {"ad-network-id":"","app-id":,"attribution-signature":"","campaign-id":,"conversion-value":,\
        "coarse-conversion-value":"","did-win":true,"fidelity-type":1,"postback-sequence-index":0,\
        "redownload":false,"source-app-id":,"source-domain":"","source-identifier":"","transaction-id":"",\
        "version":"4.0"}{"attribution":true,"orgId":,"campaignId":,"conversionType":"Download",\
        "claimType":"Click","adGroupId":,"countryOrRegion":"US","keywordId":,"adId":,"clickDate":"T:00Z",\
        "impressionDate":""}{"adservices_token":"","type":"purchase","name":"","bundle_id":"","idfv":"",\
        "idfa":"","att_status":3,"ip":"","user_agent":"","os_version":"","device_model":"","locale":"en_US",\
        "revenue":,"currency":"USD","transaction_id":"","timestamp":"T:00Z","event_id":"",\
        "vendor_ids":{"appsflyer_id":"","adid":""}}{"Version3.1":{"iad-adgroup-id":"","iad-adgroup-name":"",\
        "iad-attribution":"true","iad-campaign-id":"","iad-campaign-name":"","iad-click-date":"T:00Z",\
        "iad-conversion-date":"T:00Z","iad-conversion-type":"Download","iad-country-or-region":"US",\
        "iad-creativeset-id":"","iad-creativeset-name":"","iad-keyword":"","iad-keyword-id":"",\
        "iad-keyword-matchtype":"Exact","iad-lineitem-id":"","iad-lineitem-name":"","iad-org-id":"",\
        "iad-org-name":"","iad-purchase-date":"T:00Z"},"app_id":"","app_user_id":""}
        """.utf8)

    // Raw deflate (no zlib header: the tag says what follows) with a small window: the
    // dictionary fits, and setting up a stream per payload stays cheap. Past the window, a
    // dictionary's last bytes count, on both sides alike.
    private static let windowBits: Int32 = -13

    private static func checksum(_ bytes: [UInt8]) -> [UInt8] {
        let value = bytes.withUnsafeBufferPointer { crc32(0, $0.baseAddress, uInt($0.count)) }
        return (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) }
    }

    private static func deflate(_ input: [UInt8], dictionary: [UInt8]) -> [UInt8]? {
        var stream = z_stream()
        guard
            deflateInit2_(
                &stream, Z_BEST_COMPRESSION, Z_DEFLATED, windowBits, 6, Z_DEFAULT_STRATEGY, zlibVersion(),
                Int32(MemoryLayout<z_stream>.size)) == Z_OK
        else { return nil }
        defer { deflateEnd(&stream) }
        let set = dictionary.withUnsafeBufferPointer {
            deflateSetDictionary(&stream, $0.baseAddress, uInt($0.count))
        }
        guard set == Z_OK else { return nil }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(input.count))) + 16)
        var input = input
        let result = input.withUnsafeMutableBufferPointer { source in
            output.withUnsafeMutableBufferPointer { target in
                stream.next_in = source.baseAddress
                stream.avail_in = uInt(source.count)
                stream.next_out = target.baseAddress
                stream.avail_out = uInt(target.count)
                return CZlib.deflate(&stream, Z_FINISH)
            }
        }
        guard result == Z_STREAM_END else { return nil }
        output.removeLast(Int(stream.avail_out))
        return output
    }

    private static func inflate(_ input: [UInt8], dictionary: [UInt8]) throws -> [UInt8] {
        var stream = z_stream()
        guard inflateInit2_(&stream, windowBits, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw Unreadable(description: "zlib could not start")
        }
        defer { inflateEnd(&stream) }
        let set = dictionary.withUnsafeBufferPointer {
            inflateSetDictionary(&stream, $0.baseAddress, uInt($0.count))
        }
        guard set == Z_OK else { throw Unreadable(description: "zlib refused the dictionary") }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: max(4096, input.count * 4))
        var input = input
        try input.withUnsafeMutableBufferPointer { source in
            stream.next_in = source.baseAddress
            stream.avail_in = uInt(source.count)
            while true {
                let (result, produced) = chunk.withUnsafeMutableBufferPointer { target in
                    stream.next_out = target.baseAddress
                    stream.avail_out = uInt(target.count)
                    let result = CZlib.inflate(&stream, Z_NO_FLUSH)
                    return (result, target.count - Int(stream.avail_out))
                }
                output.append(contentsOf: chunk[..<produced])
                if result == Z_STREAM_END { return }
                guard result == Z_OK || (result == Z_BUF_ERROR && produced > 0) else {
                    throw Unreadable(description: "the stored raw payload is damaged (zlib \(result))")
                }
                if produced == 0 && stream.avail_in == 0 {
                    throw Unreadable(description: "the stored raw payload is cut short")
                }
            }
        }
        return output
    }
}

extension AttributionRecord {
    /// A record read back from its stored body, the columns holding the fields the body
    /// leaves out (``EncodedRecord/keptApart``) and, when its payload was kept apart, the
    /// stored ``CompactRaw`` value.
    public init(body: Data, keptApart: StoredColumns, compactRaw: [UInt8]?) throws {
        // The payload goes back into the body's text, read once as a whole record: the
        // record's reader, not a second one, decides what a stored record may hold.
        guard let compactRaw, let close = body.lastIndex(of: UInt8(ascii: "}")) else {
            try self.init(jsonData: body, keptApart: keptApart)
            return
        }
        var joined = Data(body[..<close])
        let empty = joined.last(where: { ![0x20, 0x0A, 0x0D, 0x09].contains($0) }) == UInt8(ascii: "{")
        joined.append(contentsOf: (empty ? "\"raw\":" : ",\"raw\":").utf8)
        joined.append(contentsOf: try CompactRaw.unpackText(compactRaw, beside: body))
        joined.append(UInt8(ascii: "}"))
        try self.init(jsonData: joined, keptApart: keptApart)
    }
}

extension EncodedRecord {
    /// The body to store (the record's JSON without `raw` and the fields kept in columns,
    /// ``EncodedRecord/keptApart``), its payload as a ``CompactRaw`` value (nil for a record
    /// without one), and its size: the record's JSON with every field under its name and the
    /// payload compressed, which a quarantined record counts against its provider's cap. The
    /// payload packs against the body each backend stores, so the backends' sizes of one
    /// record can differ by a few bytes.
    public var stored: (body: String, raw: [UInt8]?, size: Int) {
        let (body, raw) = storedBody(apartFrom: "raw")
        let packed = raw.map { CompactRaw.pack($0, beside: body) }
        return (String(decoding: body, as: UTF8.self), packed, namedCount - (raw?.count ?? 0) + (packed?.count ?? 0))
    }
}
