import Foundation
import Testing

@testable import GatewayProviders

/// A pending token's stored state reads back whole, whichever writer stored it: rows
/// written by JSONEncoder before stay readable (it wrote each `/` of a Base64 token as
/// `\/`), and an older gateway reads new rows.
@Suite struct AdServicesStateTests {
    static let states = [
        AdServicesProvider.State(
            token: String(repeating: "Qm/V+Y2g=", count: 115), appID: "1234567890", appUserID: "user \"quoted\" é",
            idfv: "6F1B3C4D-0000-4000-8000-00000000000A", idfa: nil, attStatus: 3, notFound: 2, errors: 1,
            malformed: 0),
        AdServicesProvider.State(token: "t", appID: "a", appUserID: "u"),
    ]

    @Test(arguments: states)
    func readsBackWhatItStores(state: AdServicesProvider.State) throws {
        #expect(AdServicesProvider.State(stored: state.stored) == state)
        #expect(AdServicesProvider.State(stored: try JSONEncoder().encode(state)) == state)
        #expect(try JSONDecoder().decode(AdServicesProvider.State.self, from: state.stored) == state)
    }

    @Test func somethingElseIsNotAState() {
        #expect(AdServicesProvider.State(stored: Data("[]".utf8)) == nil)
        #expect(AdServicesProvider.State(stored: Data(#"{"token":"t"}"#.utf8)) == nil)
    }
}
