import Foundation
import GatewayCore

/// What a Mixpanel refusal says, for a dead letter's reason: its JSON `error` when it has
/// one, else the start of the answer, the project token taken out either way. A reason
/// is shown by `dlq list` and kept in the store; an answer that quoted the request (a
/// proxy's error page, a future API) must not put the token there.
enum MixpanelRefusal {
    static func reason(_ text: String, token: String) -> String {
        var said = text
        if case .string(let error)? = (try? JSONValue.parse(Data(text.utf8)))?["error"] { said = error }
        return String(SecretText.removing([token], from: said, as: "project token").prefix(200))
    }
}
