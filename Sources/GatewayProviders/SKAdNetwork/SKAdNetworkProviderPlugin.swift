import Foundation
import Crypto
import GatewayCore

/// Registers the postback provider under `providers: skadnetwork:`.
public enum SKAdNetworkProviderPlugin: ProviderPlugin {
    public typealias Options = SKAdNetworkProvider.Options
    public static let typeName = SKAdNetworkProvider.typeName

    public static func readOptions(_ reader: ConfigReader) -> Options? {
        var options = Options()
        let before = reader.diagnostics.issues.count
        if let policy = reader.choice(
            "on_invalid_signature", SKAdNetworkProvider.InvalidSignaturePolicy.allCases.map(\.rawValue))
        {
            options.onInvalidSignature = .init(rawValue: policy)!
        }
        if let megabytes = reader.int("quarantine_max_mb", in: 1...1_048_576) {
            options.quarantineMaxBytes = megabytes << 20
        }
        if let allow = reader.bool("allow_development_keys") { options.keys.allowDevelopmentKeys = allow }
        if let (_, model) = reader.includedFile("conversion_model") {
            options.conversionModel = ConversionModel.read(model)
        }
        if let keys = reader.child("keys") {
            if let text = keys.string("skan_p192") {
                do { options.keys.skanP192 = try PostbackKeys.p192Key(text) } catch {
                    keys.report("\(error)", key: "skan_p192")
                }
            }
            if let text = keys.string("skan_p256") {
                do { options.keys.skanP256 = try PostbackKeys.p256Key(text) } catch {
                    keys.report("\(error)", key: "skan_p256")
                }
            }
            if let production = readKeyMap(keys, "aak_production") { options.keys.aakProduction = production }
            if let development = readKeyMap(keys, "aak_development") { options.keys.aakDevelopment = development }
            keys.finish()
        }
        return reader.diagnostics.issues.count == before ? options : nil
    }

    /// `{kid: base64 SPKI}`; a map given replaces Apple's.
    static func readKeyMap(_ reader: ConfigReader, _ key: String) -> [String: P256.Signing.PublicKey]? {
        guard let map = reader.child(key) else { return nil }
        var keys: [String: P256.Signing.PublicKey] = [:]
        for kid in map.keys {
            guard let text = map.string(kid) else { continue }
            do { keys[kid] = try PostbackKeys.p256Key(text) } catch { map.report("\(error)", key: kid) }
        }
        map.finish()
        return keys
    }

    public static func makeProvider(options: Options) throws -> any AttributionProvider {
        SKAdNetworkProvider(options: options)
    }

    public static func routes(options: Options, context: ProviderRouteContext) -> [ContributedRoute] {
        options.conversionModel.map { [conversionValueRoute(model: $0)] } ?? []
    }
}
