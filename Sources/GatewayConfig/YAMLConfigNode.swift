import GatewayCore
import Yams

/// Turns YAML text into a ``ConfigNode`` tree that remembers every value's line.
enum YAMLConfigNode {
    static func parse(_ yaml: String, file: String) throws(ConfigError) -> ConfigNode {
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch let error as YamlError {
            throw ConfigError(issues: [issue(for: error, file: file)])
        } catch {
            throw ConfigError(issues: [ConfigIssue(file: file, path: "", line: 0, column: 0, message: "\(error)")])
        }
        guard let root else { return ConfigNode(.null, line: 1, column: 1) }
        // Aliases are expanded: ten of an anchor that holds ten of another, nine deep (the
        // "billion laughs"), is a small file and a billion values, which ran a server
        // reloading it out of memory. Written out, a value takes at least a byte of the
        // file; more values than bytes can only come from aliases multiplying them.
        var budget = yaml.utf8.count + 1_000
        guard let node = convert(root, budget: &budget) else {
            throw ConfigError(issues: [
                ConfigIssue(
                    file: file, path: "", line: 0, column: 0,
                    message:
                        "aliases expand to more values than the file holds (\(yaml.utf8.count) bytes); write them out")
            ])
        }
        return node
    }

    /// The tree, or nil once it has taken more than `budget` values.
    static func convert(_ node: Node, budget: inout Int) -> ConfigNode? {
        budget -= 1
        guard budget >= 0 else { return nil }
        let line = node.mark?.line ?? 0
        let column = node.mark?.column ?? 0
        switch node {
        case .scalar(let scalar):
            let plain = scalar.style == .plain || scalar.style == .any
            if plain, ["", "~", "null", "Null", "NULL"].contains(scalar.string) {
                return ConfigNode(.null, line: line, column: column)
            }
            return ConfigNode(.scalar(scalar.string, plain: plain), line: line, column: column)
        case .mapping(let mapping):
            var entries: [(key: String, value: ConfigNode)] = []
            // `<<: *defaults` (or a list of them): the merged mappings' keys, under those
            // written out, which win; of two merged mappings, the first listed wins.
            var merged: [(key: String, value: ConfigNode)] = []
            for pair in mapping {
                if let sources = mergeSources(pair) {
                    for source in sources {
                        guard let converted = convert(source, budget: &budget) else { return nil }
                        guard case .mapping(let inherited) = converted.value else { continue }
                        for entry in inherited where !merged.contains(where: { $0.key == entry.key }) {
                            merged.append(entry)
                        }
                    }
                    continue
                }
                guard var value = convert(pair.value, budget: &budget) else { return nil }
                value.keyLine = pair.key.mark?.line ?? 0
                value.keyColumn = pair.key.mark?.column ?? 0
                entries.append((key: pair.key.string ?? "\(pair.key)", value: value))
            }
            for entry in merged where !entries.contains(where: { $0.key == entry.key }) { entries.append(entry) }
            return ConfigNode(.mapping(entries), line: line, column: column)
        case .sequence(let sequence):
            var items: [ConfigNode] = []
            for item in sequence {
                guard let converted = convert(item, budget: &budget) else { return nil }
                items.append(converted)
            }
            return ConfigNode(.sequence(items), line: line, column: column)
        case .alias:
            return ConfigNode(.scalar("*alias", plain: false), line: line, column: column)
        }
    }

    /// The mappings a merge key (`<<`, plain) brings in: one, or a list of them; nil for
    /// any other pair, and for a `<<` holding anything else, which is then an unknown key.
    static func mergeSources(_ pair: Node.Mapping.Element) -> [Node]? {
        guard case .scalar(let key) = pair.key, key.string == "<<", key.style == .plain || key.style == .any else {
            return nil
        }
        switch pair.value {
        case .mapping: return [pair.value]
        case .sequence(let list) where list.allSatisfy({ if case .mapping = $0 { true } else { false } }):
            return Array(list)
        default: return nil
        }
    }

    static func issue(for error: YamlError, file: String) -> ConfigIssue {
        switch error {
        case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _),
            .composer(_, let problem, let mark, _):
            return ConfigIssue(
                file: file, path: "", line: mark.line, column: mark.column, message: "not valid YAML: \(problem)")
        case .duplicatedKeysInMapping(let duplicates, let context):
            return ConfigIssue(
                file: file, path: "", line: context.mark.line, column: context.mark.column,
                message: "duplicate keys: \(duplicates.joined(separator: ", "))")
        case .reader(let problem, let offset, _, let yaml):
            // Never the error's own description: it quotes the line, which may hold a key.
            let (line, column) = offset.flatMap { position(of: $0, in: yaml) } ?? (0, 0)
            return ConfigIssue(file: file, path: "", line: line, column: column, message: "not valid YAML: \(problem)")
        default:
            return ConfigIssue(file: file, path: "", line: 0, column: 0, message: "not valid YAML: \(error)")
        }
    }

    /// The 1-based line and column of a byte offset into `yaml`.
    static func position(of offset: Int, in yaml: String) -> (Int, Int)? {
        let bytes = Array(yaml.utf8)
        guard offset >= 0, offset <= bytes.count else { return nil }
        let before = bytes[..<offset]
        let line = before.count { $0 == UInt8(ascii: "\n") } + 1
        let column = offset - (before.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? 0) + 1
        return (line, column)
    }
}
