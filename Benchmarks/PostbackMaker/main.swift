import Crypto
import Foundation
import GatewayCore
import GatewayProviders

// Makes signed SKAN 4.0 postbacks for the benchmark, since wrk cannot sign: prints the
// test key's SPKI (for the gateway's config) on the first line, then one postback per
// line. With --measure, it instead times verification on one core, to estimate the
// share of the server's time that signatures take.
let arguments = CommandLine.arguments
let count = arguments.count > 1 ? Int(arguments[1]) ?? 100_000 : 100_000
let key = P256.Signing.PrivateKey()

func postback(_ index: Int) throws -> [String: JSONValue] {
    let transaction = "bench-\(UUID().uuidString.lowercased())-\(index)"
    let values = [
        "4.0", "example123.skadnetwork", "5239", "525463029", transaction, "false", "example.com", "1", "true", "0",
    ]
    let signature = try key.signature(for: Data(values.joined(separator: "\u{2063}").utf8))
    return [
        "version": .string("4.0"), "ad-network-id": .string("example123.skadnetwork"),
        "source-identifier": .string("5239"),
        "app-id": .integer(525_463_029), "transaction-id": .string(transaction), "redownload": .bool(false),
        "source-domain": .string("example.com"), "fidelity-type": .integer(1), "did-win": .bool(true),
        "postback-sequence-index": .integer(0), "conversion-value": .integer(Int64(index % 64)),
        "attribution-signature": .string(signature.derRepresentation.base64EncodedString()),
    ]
}

if arguments.contains("--measure") {
    let samples = try (0..<2000).map(postback)
    var options = SKAdNetworkProvider.Options()
    options.keys.skanP256 = key.publicKey
    let provider = SKAdNetworkProvider(options: options)
    let clock = ContinuousClock()
    var verified = 0
    let elapsed = clock.measure {
        for sample in samples where provider.verify(sample).outcome == .verified { verified += 1 }
    }
    let micros = Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6
    print(String(format: "%.1f", micros / Double(samples.count)), verified == samples.count ? "ok" : "FAILED")
} else {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    var output = key.publicKey.derRepresentation.base64EncodedString() + "\n"
    for index in 0..<count {
        output += String(decoding: try encoder.encode(JSONValue.object(try postback(index))), as: UTF8.self) + "\n"
        if output.utf8.count > 1 << 20 {
            FileHandle.standardOutput.write(Data(output.utf8))
            output = ""
        }
    }
    FileHandle.standardOutput.write(Data(output.utf8))
}
