import Foundation
import GatewayCore
import Testing

/// The JSON parser against JSONSerialization, the reference it replaced: the same values
/// for valid documents, a refusal for invalid ones. Where JSONSerialization is wrong on
/// Linux (doubles that do not round-trip, integers at Int64's ends), the test states the
/// right value instead.
@Suite struct JSONParserTests {
    static let valid = [
        #"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#, #"  [ 1 , -2 , 3.5 , -0.25e2 , 1E3 , 0 ]  "#, #""plain""#,
        #"{"escapes":"q\" b\\ s\/ n\n r\r t\t b\b f\f u\u00e9 \u65E5 pair\ud83c\udf89 nul\u0000"}"#,
        #"{"unicode":"é 日本 🎉"}"#, #"{"tiny":1e-300,"frac":0.1}"#, "[]", "{}", #"[[[[[]]]]]"#, "42", "null",
        #"{"dup":1,"dup":2}"#, #"{"":""}"#,
    ]
    static let invalid = [
        "", " ", "{", "}", "[1,]", "[,1]", #"{"a":}"#, #"{"a" 1}"#, #"{a:1}"#, "01", "1.", ".5", "-", "+1", "1e",
        "tru", "nul", "[1 2]", #""unterminated"#, "\"tab\there\"", #""\x""#, #""\u12""#, #""\ud83c""#, #""\udf89""#,
        "1e999", "[1] x", "NaN", "{\"a\":1}}", "\"\u{0}\"",
    ]

    @Test(arguments: valid)
    func readsWhatJSONSerializationReads(text: String) throws {
        let data = Data(text.utf8)
        let reference = JSONValue(reference: try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]))
        #expect(try JSONValue.parse(data) == reference)
    }

    @Test(arguments: invalid)
    func refusesWhatIsNotJSON(text: String) {
        #expect(throws: (any Error).self) { try JSONValue.parse(Data(text.utf8)) }
    }

    @Test func integersStayExactToInt64sEndsAndBeyondThemAreDoubles() throws {
        let parsed = try JSONValue.parse(
            Data(#"[9223372036854775807,-9223372036854775808,9223372036854775808,370870.04353789333]"#.utf8))
        #expect(
            parsed
                == .array([
                    .integer(.max), .integer(.min), .double(9_223_372_036_854_775_808), .double(370870.04353789333),
                ]))
        // The longest integers read without a string, and the shortest read with one.
        let edges = try JSONValue.parse(Data(#"[999999999999999999,-99999999999999999,1000000000000000000,-0,7]"#.utf8))
        #expect(
            edges
                == .array([
                    .integer(999_999_999_999_999_999), .integer(-99_999_999_999_999_999),
                    .integer(1_000_000_000_000_000_000), .integer(0), .integer(7),
                ]))
    }

    @Test func aByteOrderMarkIsSkippedAsJSONSerializationDid() throws {
        #expect(try JSONValue.parse(Data([0xEF, 0xBB, 0xBF] + Array(#"{"a":1}"#.utf8))) == .object(["a": .integer(1)]))
    }

    @Test func refusesInvalidUTF8AndDeepNesting() {
        #expect(throws: (any Error).self) { try JSONValue.parse(Data([0x22, 0xFF, 0xFE, 0x22])) }
        #expect(throws: JSONValue.TooDeep.self) {
            try JSONValue.parse(Data((String(repeating: "[", count: 40) + String(repeating: "]", count: 40)).utf8))
        }
        #expect(throws: Never.self) {
            try JSONValue.parse(Data((String(repeating: "[", count: 30) + String(repeating: "]", count: 30)).utf8))
        }
    }

    @Test func randomDocumentsReadBackExactly() throws {
        var generator = SystemRandomNumberGenerator()
        // Each value with what it must read back as.
        func value(_ depth: Int) -> (Any, JSONValue) {
            switch Int.random(in: 0..<(depth > 3 ? 4 : 6), using: &generator) {
            case 0:
                let n = Int64.random(in: (Int64.min + 1)...(Int64.max - 1), using: &generator)
                return (n, .integer(n))
            case 1:
                let d = Double.random(in: -1e6...1e6, using: &generator)
                return (d, .double(d))
            case 2:
                let text = String(
                    (0..<Int.random(in: 0..<12, using: &generator)).map { _ in
                        Character(Unicode.Scalar(UInt32.random(in: 0x20...0x2FF, using: &generator))!)
                    })
                return (text, .string(text))
            case 3:
                let b = Bool.random(using: &generator)
                return (b, .bool(b))
            case 4:
                let items = (0..<Int.random(in: 0..<4, using: &generator)).map { _ in value(depth + 1) }
                return (items.map(\.0), .array(items.map(\.1)))
            default:
                let items = (0..<Int.random(in: 0..<4, using: &generator)).map { ("k\($0)", value(depth + 1)) }
                return (
                    Dictionary(uniqueKeysWithValues: items.map { ($0.0, $0.1.0) }),
                    .object(Dictionary(uniqueKeysWithValues: items.map { ($0.0, $0.1.1) }))
                )
            }
        }
        for _ in 0..<500 {
            let (object, expected) = value(0)
            let data = try JSONSerialization.data(withJSONObject: [object])
            #expect(try JSONValue.parse(data) == .array([expected]), "\(String(decoding: data, as: UTF8.self))")
        }
    }
}

extension JSONValue {
    /// What JSONSerialization read, converted as the gateway did before its own parser:
    /// booleans told from numbers by the number's type code, integers kept exact.
    init(reference value: Any) {
        switch value {
        case let string as String:
            self = .string(string)
        case let number as NSNumber:
            switch String(cString: number.objCType) {
            case "c", "B": self = .bool(number.boolValue)
            case "d", "f": self = .double(number.doubleValue)
            default: self = .integer(number.int64Value)
            }
        case let object as [String: Any]:
            self = .object(object.mapValues(JSONValue.init(reference:)))
        case let array as [Any]:
            self = .array(array.map(JSONValue.init(reference:)))
        default:
            self = .null
        }
    }
}
