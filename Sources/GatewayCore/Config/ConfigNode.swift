import Foundation
/// A parsed configuration document with the position of every value, independent of the
/// YAML library so that plugins can read their options without depending on it.
public struct ConfigNode: Sendable {
    public enum Value: Sendable {
        /// A scalar as written. `plain` is false for quoted scalars, which are never null,
        /// booleans or numbers by accident.
        case scalar(String, plain: Bool)
        case mapping([(key: String, value: ConfigNode)])
        case sequence([ConfigNode])
        case null
    }

    public var value: Value
    /// 1-based line, or 0 when unknown.
    public var line: Int
    public var column: Int
    /// Where the key that holds this value is written, when it is a mapping's value: a
    /// block mapping's value starts on the line after its key, and errors about the key
    /// itself (unknown, duplicate) must point at the key.
    public var keyLine = 0
    public var keyColumn = 0

    /// A node standing for the key that holds this value, for reporting.
    var keyPosition: ConfigNode {
        keyLine > 0 ? ConfigNode(.null, line: keyLine, column: keyColumn) : self
    }

    public init(_ value: Value, line: Int = 0, column: Int = 0) {
        self.value = value
        self.line = line
        self.column = column
    }

    var typeName: String {
        switch value {
        case .scalar: "a scalar"
        case .mapping: "a mapping"
        case .sequence: "a list"
        case .null: "null"
        }
    }
}

/// One problem found in a configuration file, with where it is.
public struct ConfigIssue: Sendable, Equatable, CustomStringConvertible {
    public var file: String
    public var path: String
    public var line: Int
    public var column: Int
    public var message: String

    public init(file: String, path: String, line: Int, column: Int, message: String) {
        self.file = file
        self.path = path
        self.line = line
        self.column = column
        self.message = message
    }

    /// `FILE:LINE:COLUMN`, or the file alone for an issue of the whole file.
    public var position: String { line > 0 ? "\(file):\(line):\(column)" : file }

    public var description: String {
        path.isEmpty ? "\(position): \(message)" : "\(position): \(path): \(message)"
    }
}

/// Collects every issue of one load, so that a user sees all of them at once.
public final class ConfigDiagnostics {
    public let file: String
    private var ownIssues: [ConfigIssue] = []
    /// Issues of an included file go to the diagnostics of the file that names it.
    private let parent: ConfigDiagnostics?
    /// Reads another YAML file (a conversion model) into a node tree; set by the loader.
    public let parseFile: (@Sendable (String) -> Result<ConfigNode, ConfigError>)?

    public init(file: String, parseFile: (@Sendable (String) -> Result<ConfigNode, ConfigError>)? = nil) {
        self.file = file
        self.parent = nil
        self.parseFile = parseFile
    }

    /// Diagnostics for a file that `parent`'s file includes: its issues name that file.
    public init(includedFile file: String, parent: ConfigDiagnostics) {
        self.file = file
        self.parent = parent
        self.parseFile = parent.parseFile
    }

    public var issues: [ConfigIssue] { parent?.issues ?? ownIssues }

    /// The path of every key the loader asked for, present or not (`[0]` for a list's first
    /// item): what the file may hold, for a check that the manual names every key.
    public private(set) var keysAsked: Set<String> = []

    func asked(_ path: String) {
        keysAsked.insert(path)
    }

    private var ownWarnings: [ConfigIssue] = []

    /// What is allowed but unsafe (a key file others can read): said by `check-config` and
    /// logged by `serve`, without refusing the file.
    public var warnings: [ConfigIssue] { parent?.warnings ?? ownWarnings }

    public func warn(_ message: String, path: String, at node: ConfigNode?) {
        let warning = ConfigIssue(
            file: file, path: path, line: node?.line ?? 0, column: node?.column ?? 0, message: scrubbed(message))
        if let parent { parent.ownWarnings.append(warning) } else { ownWarnings.append(warning) }
    }

    /// The files of configuration keys name (a conversion model, a key file), by the key's
    /// path: a reload compares their contents, since the file may change while its name
    /// does not. Not a store or a folder the gateway writes.
    public var filesNamed: [String: String] { parent?.filesNamed ?? ownFilesNamed }
    private var ownFilesNamed: [String: String] = [:]

    func named(file: String, at path: String) {
        if let parent { parent.named(file: file, at: path) } else { ownFilesNamed[path] = file }
    }

    public func append(_ issues: [ConfigIssue]) {
        if let parent { parent.append(issues) } else { ownIssues += issues }
    }

    public func report(_ message: String, path: String, at node: ConfigNode?) {
        append([
            ConfigIssue(
                file: file, path: path, line: node?.line ?? 0, column: node?.column ?? 0, message: scrubbed(message))
        ])
    }

    /// Values read from the environment, longest first, with the variable each came from.
    private var fromEnvironment: [(value: String, name: String)] = []

    /// Remembers a value read from the environment, so that no issue quotes it: a variable
    /// may hold a secret put under the wrong key (a vendor's API key as `vendor:`), and a
    /// check that quotes what it refused would print it.
    func remember(_ value: String, from name: String) {
        if let parent { return parent.remember(value, from: name) }
        // Shorter values are no secret, and would match ordinary words and numbers.
        guard value.count >= 8, !fromEnvironment.contains(where: { $0.value == value }) else { return }
        fromEnvironment.append((value, name))
        fromEnvironment.sort { $0.value.count > $1.value.count }
    }

    private func scrubbed(_ message: String) -> String {
        if let parent { return parent.scrubbed(message) }
        return fromEnvironment.reduce(message) { text, entry in
            text.replacingOccurrences(of: entry.value, with: "${\(entry.name)}")
        }
    }
}

/// Thrown when a configuration file has one or more issues.
public struct ConfigError: Error, Sendable, CustomStringConvertible {
    public var issues: [ConfigIssue]

    public init(issues: [ConfigIssue]) {
        self.issues = issues
    }

    public var description: String {
        issues.map(\.description).joined(separator: "\n")
    }
}
