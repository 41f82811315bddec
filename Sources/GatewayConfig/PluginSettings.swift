import Crypto
import Foundation
import GatewayCore

/// One plugin's settings as the file has them (a sink, a provider, an enricher), flattened
/// to `key.path` → value, so that two files can say which settings differ. Plugins' options
/// are their own types and cannot be compared; their YAML can. Secrets are held as digests.
public struct PluginSettings: Sendable, Equatable {
    /// One setting's value: what may be shown of it, and what compares it.
    public struct Value: Sendable, Equatable {
        /// The value as a diff may print it; nil when it must never be printed.
        public var shown: String?
        /// The value itself when it may be shown, else its SHA-256.
        var fingerprint: String
        /// Under a key that holds a credential (`token`, `secret`, `headers`...).
        public var secret: Bool
    }

    public var values: [String: Value]
    /// The SHA-256 of each file a setting names, by the setting's key: the same name with
    /// other contents (a conversion model edited in place) is a change.
    public var files: [String: String] = [:]

    /// Keys whose values are credentials, wherever they appear in a plugin's settings;
    /// everything under `headers` is (an `Authorization` header), and so is any key that
    /// ends in one of these after an underscore (`callback_secret`, `app_token`). A
    /// program's command line and environment may carry one too (`--password=…`).
    static let secretKeys: Set<String> = [
        "secret", "token", "key", "password", "private_key", "api_key", "headers", "command", "env", "environment",
    ]

    static func isSecret(_ path: [String]) -> Bool {
        path.contains { component in
            secretKeys.contains(component)
                || secretKeys.contains { component.hasSuffix("_\($0)") && $0 != "headers" }
        }
    }

    /// The settings of every plugin under `sinks:`, `providers:` and `enrichers:` of a file's
    /// root, keyed `sinks.NAME`: what ``ConfigurationDiff`` compares.
    static func read(_ root: ConfigNode, environment: [String: String], files: [String: String] = [:])
        -> [String: PluginSettings]
    {
        guard case .mapping(let sections) = root.value else { return [:] }
        var result: [String: PluginSettings] = [:]
        for (section, node) in sections where ["sinks", "providers", "enrichers"].contains(section) {
            guard case .mapping(let plugins) = node.value else { continue }
            for (name, options) in plugins {
                var values: [String: Value] = [:]
                flatten(options, path: [], environment: environment, into: &values)
                result["\(section).\(name)"] = PluginSettings(values: values)
            }
        }
        for (path, file) in files {
            guard let plugin = result.keys.first(where: { path.hasPrefix($0 + ".") }) else { continue }
            let contents = FileManager.default.contents(atPath: file).map { Array(SHA256.hash(data: $0)) }
            result[plugin]?.files[String(path.dropFirst(plugin.count + 1))] =
                contents.map(Hex.lowercase) ?? "unreadable"
        }
        return result
    }

    static func flatten(
        _ node: ConfigNode, path: [String], environment: [String: String], into values: inout [String: Value]
    ) {
        let key = path.reduce("") { joined, part in
            part.hasPrefix("[") || joined.isEmpty ? joined + part : joined + "." + part
        }
        switch node.value {
        case .mapping(let entries):
            for entry in entries {
                flatten(entry.value, path: path + [entry.key], environment: environment, into: &values)
            }
        case .sequence(let items):
            if items.isEmpty { values[key] = Value(shown: "[]", fingerprint: "[]", secret: false) }
            for (index, item) in items.enumerated() {
                flatten(item, path: path + ["[\(index)]"], environment: environment, into: &values)
            }
        case .null:
            values[key] = Value(shown: "null", fingerprint: "null", secret: false)
        case .scalar(let written, _):
            let text = ConfigReader.interpolated(written, environment: environment) ?? written
            let digest = Hex.lowercase(SHA256Hex.digest(text))
            if isSecret(path) {
                values[key] = Value(shown: nil, fingerprint: digest, secret: true)
            } else if written.contains("${") {
                // The environment may hold a secret under the wrong key: never printed.
                values[key] = Value(shown: nil, fingerprint: digest, secret: false)
            } else if text.contains("://") {
                values[key] = Value(shown: shownURL(text), fingerprint: digest, secret: false)
            } else {
                values[key] = Value(shown: text, fingerprint: text, secret: false)
            }
        }
    }

    /// Scheme, host and port: never the credentials, the query or the path, which can each
    /// hold a token (a Slack hook's path is its secret); a path is shown as `/…`.
    static func shownURL(_ text: String) -> String {
        guard let parts = URLComponents(string: text), let scheme = parts.scheme, let host = parts.host else {
            return "(a URL not shown)"
        }
        let path = parts.path.isEmpty || parts.path == "/" ? "" : "/…"
        return "\(scheme)://\(host)\(parts.port.map { ":\($0)" } ?? "")\(path)"
    }

    /// What differs from `old` to these settings, one phrase per key in key order; never a
    /// secret's value, nor one taken from the environment.
    func changes(from old: PluginSettings) -> [String] {
        let edited = Set(old.files.keys).union(files.keys).sorted().compactMap { key in
            old.files[key] != files[key] && old.values[key] == values[key] ? "\(key): the file's contents changed" : nil
        }
        return edited
            + Set(old.values.keys).union(values.keys).sorted().compactMap { key in
                let before = old.values[key]
                let after = values[key]
                guard before != after else { return nil }
                if before?.secret == true || after?.secret == true { return "\(key): secret changed" }
                let shownBefore = before.map { $0.shown } ?? "(unset)"
                let shownAfter = after.map { $0.shown } ?? "(unset)"
                if let shownBefore, let shownAfter {
                    // A URL whose shown part stayed: its path, query or credentials changed.
                    return shownBefore == shownAfter
                        ? "\(key): changed (its path, query or credentials, not shown)"
                        : "\(key): \(shownBefore) -> \(shownAfter)"
                }
                return "\(key): changed (its value comes from the environment, not shown)"
            }
    }
}
