import Foundation
import GatewayCore
import Testing

/// Outside services' answers, with the request's credentials taken out before they are kept.
@Suite struct SecretTextTests {
    @Test func aSecretIsTakenOutAsWrittenPercentEncodedAndInAnyCase() {
        let key = "AdjKey+/=Secret 9"
        let page =
            "authorization: Bearer \(key)\nurl: /event?s2s=1&token=AdjKey%2B%2F%3DSecret%209\nlower=bearer adjkey+/=secret 9"
        let kept = SecretText.removing([key, ""], from: page, as: "key")
        #expect(!kept.lowercased().contains("adjkey"), "\(kept)")
        #expect(kept.components(separatedBy: "<key>").count == 4, "\(kept)")
        // As a form writes a space, a URL leaves a slash, and JSON may escape one.
        for spelling in [#"AdjKey%2B%2F%3DSecret+9"#, #"AdjKey%2B/%3DSecret%209"#, #"AdjKey+\/=Secret 9"#] {
            let quoted = SecretText.removing([key], from: "echo: \(spelling) end", as: "key")
            #expect(quoted == "echo: <key> end", "\(spelling): \(quoted)")
        }
    }

    /// Every byte percent-encoded, and Base64 as a Basic header quoted back carries it.
    @Test func aSecretIsTakenOutEncodedByteByByteAndInBase64() {
        let key = "ADJKEY-SECRET"
        let everyByte = key.utf8.map { "%" + String($0, radix: 16, uppercase: true) }.joined()
        let basic = Data((key + ":").utf8).base64EncodedString()
        let page = "Bearer \(everyByte) Basic \(basic) raw \(Data(key.utf8).base64EncodedString())"
        let kept = SecretText.removing([key], from: page, as: "key")
        #expect(kept == "Bearer <key> Basic <key> raw <key>", "\(kept)")
        // A short value's Base64 is left alone: other words hold those letters too.
        #expect(SecretText.removing(["k"], from: "aw aw== ok", as: "key") == "aw aw== o<key>")
    }
}
