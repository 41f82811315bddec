import GatewayCore
import Testing

/// Outside services' answers, with the request's credentials taken out before they are kept.
@Suite struct SecretTextTests {
    @Test func aSecretIsTakenOutAsWrittenPercentEncodedAndInAnyCase() {
        let key = "AdjKey+/=Secret 9"
        let page = "authorization: Bearer \(key)\nurl: /event?s2s=1&token=AdjKey%2B%2F%3DSecret%209\nlower=bearer adjkey+/=secret 9"
        let kept = SecretText.removing([key, ""], from: page, as: "key")
        #expect(!kept.lowercased().contains("adjkey"), "\(kept)")
        #expect(kept.components(separatedBy: "<key>").count == 4, "\(kept)")
    }
}
