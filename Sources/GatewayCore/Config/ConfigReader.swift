import Foundation

/// Reads one mapping of the configuration with typed accessors, reporting every problem
/// to the shared ``ConfigDiagnostics`` with its YAML path and line instead of stopping at
/// the first one.
///
/// It remembers which keys were read: ``finish()`` reports the rest as unknown keys (with
/// a "did you mean" when one is close), which is how typos in config.yaml become errors
/// rather than silently ignored settings. `${VAR}` and `${VAR:-default}` in scalars are
/// replaced from the environment when read.
public final class ConfigReader {
    public let path: String
    public let node: ConfigNode
    public let diagnostics: ConfigDiagnostics
    let environment: [String: String]
    private var entries: [(key: String, value: ConfigNode)] = []
    private var consumed: Set<String> = []

    public init(node: ConfigNode, path: String, diagnostics: ConfigDiagnostics, environment: [String: String]) {
        self.node = node
        self.path = path
        self.diagnostics = diagnostics
        self.environment = environment
        switch node.value {
        case .mapping(let entries):
            var seen: Set<String> = []
            for entry in entries {
                if !seen.insert(entry.key).inserted {
                    diagnostics.report(
                        "duplicate key '\(entry.key)'", path: join(entry.key), at: entry.value.keyPosition)
                }
            }
            self.entries = entries
        case .null:
            break
        default:
            diagnostics.report("expected a mapping, found \(node.typeName)", path: path, at: node)
        }
    }

    /// The keys present in this mapping, in file order.
    public var keys: [String] { entries.map(\.key) }

    public func has(_ key: String) -> Bool {
        diagnostics.asked(join(key))
        return entries.contains { $0.key == key }
    }

    func join(_ key: String) -> String {
        path.isEmpty ? key : "\(path).\(key)"
    }

    /// The raw node at `key`, marking it read.
    public func node(_ key: String) -> ConfigNode? {
        consumed.insert(key)
        diagnostics.asked(join(key))
        guard let node = entries.last(where: { $0.key == key })?.value else { return nil }
        if case .null = node.value { return nil }
        return node
    }

    /// Reports a problem with the value at `key` (or with this mapping when `key` is nil).
    public func report(_ message: String, key: String? = nil) {
        let target = key.flatMap { k in entries.last(where: { $0.key == k })?.value } ?? node
        diagnostics.report(message, path: key.map(join) ?? path, at: target)
    }

    // MARK: scalars

    /// A string, with environment variables interpolated.
    public func string(_ key: String) -> String? {
        guard let node = node(key) else { return nil }
        guard case .scalar(let text, _) = node.value else {
            diagnostics.report("expected a string, found \(node.typeName)", path: join(key), at: node)
            return nil
        }
        return interpolate(text, key: key, node: node)
    }

    /// How a refused value is shown: as written, or, when it came from the environment,
    /// as the expression it came from (`${MP_TOKEN}`), since the variable may hold a
    /// secret put in the wrong key.
    func found(_ key: String, _ text: String) -> String {
        if let node = node(key), case .scalar(let written, _) = node.value, written.contains("${") {
            return "found the value of \(written)"
        }
        return "found '\(text)'"
    }

    /// A string that must be present and non-empty.
    public func requiredString(_ key: String) -> String? {
        guard node(key) != nil else {
            diagnostics.report("is required", path: join(key), at: node)
            return nil
        }
        guard let value = string(key) else { return nil }
        if value.isEmpty {
            report("must not be empty", key: key)
            return nil
        }
        return value
    }

    public func int(_ key: String, in range: ClosedRange<Int>? = nil) -> Int? {
        guard let text = string(key) else { return nil }
        guard let value = Int(text.trimmingCharacters(in: .whitespaces)) else {
            report("expected an integer, \(found(key, text))", key: key)
            return nil
        }
        if let range, !range.contains(value) {
            report("must be between \(range.lowerBound) and \(range.upperBound), found \(value)", key: key)
            return nil
        }
        return value
    }

    public func bool(_ key: String) -> Bool? {
        guard let text = string(key) else { return nil }
        switch text.lowercased() {
        case "true": return true
        case "false": return false
        default:
            report("expected true or false, \(found(key, text))", key: key)
            return nil
        }
    }

    /// An http or https URL with a host (an outside service's base URL).
    public func url(_ key: String) -> String? {
        guard let text = string(key) else { return nil }
        guard let url = URL(string: text), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
            report("expected an http(s) URL, \(found(key, text))", key: key)
            return nil
        }
        return text
    }

    /// One of a fixed set of words.
    public func choice(_ key: String, _ allowed: [String]) -> String? {
        guard let text = string(key) else { return nil }
        guard allowed.contains(text) else {
            report(
                "must be one of \(allowed.joined(separator: ", ")), \(found(key, text))\(suggestion(text, allowed))",
                key: key)
            return nil
        }
        return text
    }

    /// A list of words from a fixed set, without repeats; nil when absent or when any word
    /// is not in the set (each such word is reported, with the nearest allowed one).
    public func choices(_ key: String, _ allowed: [String]) -> [String]? {
        guard let words = stringList(key) else { return nil }
        let unknown = words.filter { !allowed.contains($0) }
        for word in unknown {
            report("'\(word)' is not one of the allowed names\(suggestion(word, allowed))", key: key)
        }
        guard unknown.isEmpty else { return nil }
        var seen = Set<String>()
        return words.filter { seen.insert($0).inserted }
    }

    /// A scalar or a list of scalars, as a list.
    public func stringList(_ key: String) -> [String]? {
        guard let node = node(key) else { return nil }
        switch node.value {
        case .scalar(let text, _):
            return interpolate(text, key: key, node: node).map { [$0] }
        case .sequence(let items):
            var values: [String] = []
            for (index, item) in items.enumerated() {
                guard case .scalar(let text, _) = item.value else {
                    diagnostics.report(
                        "expected a string, found \(item.typeName)", path: "\(join(key))[\(index)]", at: item)
                    continue
                }
                if let value = interpolate(text, key: key, node: item) { values.append(value) }
            }
            return values
        default:
            diagnostics.report(
                "expected a string or a list of strings, found \(node.typeName)", path: join(key), at: node)
            return nil
        }
    }

    // MARK: nesting

    /// The mapping at `key`, or nil when absent. A key written with nothing after it
    /// (`iad:`) is an empty mapping, not an absent one: it still gets checked and defaults.
    public func child(_ key: String) -> ConfigReader? {
        consumed.insert(key)
        diagnostics.asked(join(key))
        guard let node = entries.last(where: { $0.key == key })?.value else { return nil }
        return ConfigReader(node: node, path: join(key), diagnostics: diagnostics, environment: environment)
    }

    /// The file named at `key`, relative to this config file's folder (not the working
    /// directory, which differs between `serve --config /etc/…` and a shell in that folder).
    public func filePath(_ key: String) -> String? {
        string(key).map(resolvedPath)
    }

    /// ``filePath(_:)`` for a file whose contents are configuration (a model, a key), which
    /// a reload compares: not a store or a folder the gateway writes.
    func readFilePath(_ key: String) -> String? {
        guard let path = filePath(key) else { return nil }
        diagnostics.named(file: path, at: join(key))
        return path
    }

    /// ``filePath(_:)`` for a file that holds a secret (a private key): warns, as ssh does,
    /// when the file's mode lets its group or others read it.
    public func secretFilePath(_ key: String) -> String? {
        guard let path = readFilePath(key) else { return nil }
        var info = stat()
        if stat(path, &info) == 0, info.st_mode & 0o044 != 0 {
            let mode = String(info.st_mode & 0o777, radix: 8)
            let target = entries.last(where: { $0.key == key })?.value ?? node
            diagnostics.warn(
                "the secret in \(path) can be read by other users (mode 0\(mode)); chmod 600 it",
                path: join(key), at: target)
        }
        return path
    }

    /// `name` relative to this config file's folder, when it is not absolute.
    public func resolvedPath(_ name: String) -> String {
        let base = (diagnostics.file as NSString).deletingLastPathComponent
        let joined = name.hasPrefix("/") || base.isEmpty ? name : (base as NSString).appendingPathComponent(name)
        return (joined as NSString).standardizingPath
    }

    /// The YAML file named at `key` (relative to this config file's folder), read as a
    /// mapping whose problems are reported with that file's name and lines.
    public func includedFile(_ key: String) -> (path: String, reader: ConfigReader)? {
        guard let path = readFilePath(key) else { return nil }
        // Named at the key that names it: the file's own name and line 0 said where to
        // look only to someone who knew which key it was.
        guard FileManager.default.isFile(atPath: path), FileManager.default.isReadableFile(atPath: path) else {
            report("cannot read \(path): no such file, a folder, or not readable by this user", key: key)
            return nil
        }
        guard let parseFile = diagnostics.parseFile else {
            report("files cannot be read here", key: key)
            return nil
        }
        switch parseFile(path) {
        case .failure(let error):
            diagnostics.append(error.issues)
            return nil
        case .success(let node):
            let included = ConfigDiagnostics(includedFile: path, parent: diagnostics)
            return (path, ConfigReader(node: node, path: "", diagnostics: included, environment: environment))
        }
    }

    /// The mappings in the list at `key`.
    public func list(_ key: String) -> [ConfigReader]? {
        guard let node = node(key) else { return nil }
        guard case .sequence(let items) = node.value else {
            diagnostics.report("expected a list, found \(node.typeName)", path: join(key), at: node)
            return nil
        }
        return items.enumerated().map { index, item in
            ConfigReader(node: item, path: "\(join(key))[\(index)]", diagnostics: diagnostics, environment: environment)
        }
    }

    /// Reports every key that nothing read as unknown.
    public func finish() {
        let known = Array(consumed)
        for entry in entries where !consumed.contains(entry.key) {
            diagnostics.report(
                "unknown key '\(entry.key)'\(suggestion(entry.key, known))", path: join(entry.key),
                at: entry.value.keyPosition)
        }
    }

    // MARK: helpers

    /// `text` with every `${NAME}` and `${NAME:-default}` replaced; a default may itself
    /// hold `${…}` (read as a shell reads it), and is read only when it is used.
    func interpolate(_ text: String, key: String, node: ConfigNode) -> String? {
        guard text.contains("${") else { return text }
        var result = ""
        var rest = Substring(text)
        while let start = rest.range(of: "${") {
            result += rest[..<start.lowerBound]
            // The `}` that closes this `${`, past any `${…}` nested in its default: the
            // first `}` would make the rest of a nested default the value itself, a
            // literal `${B}` taken as a key or a signing secret.
            var depth = 1
            var index = start.upperBound
            while index < rest.endIndex, depth > 0 {
                if rest[index...].hasPrefix("${") {
                    depth += 1
                    index = rest.index(index, offsetBy: 2)
                    continue
                }
                if rest[index] == "}" { depth -= 1 }
                if depth > 0 { index = rest.index(after: index) }
            }
            guard depth == 0 else {
                diagnostics.report("unterminated ${ in value", path: join(key), at: node)
                return nil
            }
            let expression = rest[start.upperBound..<index]
            let name: Substring
            let fallback: Substring?
            if let separator = expression.range(of: ":-") {
                name = expression[..<separator.lowerBound]
                fallback = expression[separator.upperBound...]
            } else {
                name = expression
                fallback = nil
            }
            guard Self.isVariableName(name) else {
                diagnostics.report(
                    "'${\(name)…}' does not name an environment variable (letters, digits, _, . and -, not first a digit)",
                    path: join(key), at: node)
                return nil
            }
            if let value = environment[String(name)], !value.isEmpty {
                diagnostics.remember(value, from: String(name))
                result += value
            } else if let fallback {
                guard let value = interpolate(String(fallback), key: key, node: node) else { return nil }
                result += value
            } else {
                // An empty value counts as unset, as `${VAR:-default}` reads it in a shell.
                let state = environment[String(name)] == nil ? "not set" : "set but empty"
                diagnostics.report(
                    "environment variable \(name) is \(state) (write ${\(name):-default} to give a default)",
                    path: join(key), at: node)
                return nil
            }
            rest = rest[rest.index(after: index)...]
        }
        return result + rest
    }

    /// `text` with its `${…}` replaced from `environment` as a read would, or nil when it
    /// cannot be: for comparing two checked files' settings, where nothing is reported.
    public static func interpolated(_ text: String, environment: [String: String]) -> String? {
        let reader = ConfigReader(
            node: ConfigNode(.null), path: "", diagnostics: ConfigDiagnostics(file: ""), environment: environment)
        return reader.interpolate(text, key: "", node: ConfigNode(.null))
    }

    /// What an environment may name, Kubernetes' `env:` included (`.` and `-`, which a
    /// shell cannot read but the gateway can).
    static func isVariableName(_ name: Substring) -> Bool {
        guard let first = name.unicodeScalars.first, !("0"..."9").contains(first) else { return false }
        return name.unicodeScalars.allSatisfy {
            "_.-".unicodeScalars.contains($0) || ("a"..."z").contains($0) || ("A"..."Z").contains($0)
                || ("0"..."9").contains($0)
        }
    }
}

/// ", did you mean 'x'?" when a known word is a small edit away.
func suggestion(_ word: String, _ candidates: [String]) -> String {
    closestName(to: word, among: candidates).map { ", did you mean '\($0)'?" } ?? ""
}

/// The candidate a small edit away from `word`, if any: what a typo most likely meant.
public func closestName(to word: String, among candidates: [String]) -> String? {
    candidates
        .map { ($0, editDistance(word.lowercased(), $0.lowercased())) }
        .filter { $0.1 <= max(2, word.count / 3) }
        .min { $0.1 < $1.1 }?.0
}

func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var previous = Array(0...b.count)
    for i in 1...a.count {
        var current = [i] + Array(repeating: 0, count: b.count)
        for j in 1...b.count {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        previous = current
    }
    return previous[b.count]
}
