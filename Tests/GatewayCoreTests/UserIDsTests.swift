import Foundation
import GatewayCore
import Testing

/// Which app user ids name a user: what forget, Mixpanel and the report rely on.
@Suite struct UserIDsTests {
    @Test func placeholdersAndAForgottenUsersStandInNameNobody() {
        for id in ["", "  ", "anon", "Anonymous", "0", "00000000-0000-0000-0000-000000000000"] {
            #expect(!UserIDs.isReal(id), "\(id)")
        }
        // The stand-in a forget writes is no one; an app's id that only begins alike is someone.
        #expect(!UserIDs.isReal(UserIDs.forgottenPrefix + UUID().uuidString.lowercased()))
        #expect(UserIDs.isReal("forgotten-password-flow-7"))
        #expect(UserIDs.isReal("e2a214e8-bbe9-4675-9d52-490575ffc53d"))
    }
}
