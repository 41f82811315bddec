import ArgumentParser
import Foundation
import GatewayCore
import GatewayProviders

struct VerifyPostback: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify-postback",
        abstract: "Verify one SKAdNetwork or AdAttributionKit postback from stdin against Apple's keys.",
        discussion: """
            Prints one line: the verdict (verified, invalid or unverifiable), the version, and \
            why when not verified. Exits 0 when verified, 1 when invalid, 2 otherwise.
            """)

    @Option(
        help:
            "Verify with this key instead of Apple's key of the same curve (base64 DER SubjectPublicKeyInfo): P-256 for SKAN 2.1-4.0 and AdAttributionKit, P-192 for 1.0 and 2.0."
    )
    var key: String?

    @Flag(help: "Accept AdAttributionKit's development keys (postbacks made in developer settings).")
    var allowDevelopmentKeys = false

    func run() throws {
        var options = SKAdNetworkProvider.Options()
        options.keys.allowDevelopmentKeys = allowDevelopmentKeys
        if let key {
            if let p256 = try? PostbackKeys.p256Key(key) {
                options.keys.skanP256 = p256
                options.keys.aakAnyKid = p256
            } else if let p192 = try? PostbackKeys.p192Key(key) {
                options.keys.skanP192 = p192
            } else {
                printError("--key: not a base64 P-256 or P-192 SubjectPublicKeyInfo")
                throw ExitCode(2)
            }
        }
        let body = FileHandle.standardInput.readDataToEndOfFile()
        guard case .object(let object)? = try? JSONValue.parse(body) else {
            print("unverifiable unknown the input is not a JSON object")
            throw ExitCode(2)
        }
        let verdict = SKAdNetworkProvider(options: options).verify(object)
        print(verdict.line)
        switch verdict.outcome {
        case .verified: return
        case .invalid: throw ExitCode(1)
        case .unverifiable: throw ExitCode(2)
        }
    }
}
