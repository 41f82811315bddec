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
        return convert(root)
    }

    static func convert(_ node: Node) -> ConfigNode {
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
            let entries = mapping.map { pair in
                var value = convert(pair.value)
                value.keyLine = pair.key.mark?.line ?? 0
                value.keyColumn = pair.key.mark?.column ?? 0
                return (key: pair.key.string ?? "\(pair.key)", value: value)
            }
            return ConfigNode(.mapping(entries), line: line, column: column)
        case .sequence(let sequence):
            return ConfigNode(.sequence(sequence.map(convert)), line: line, column: column)
        case .alias:
            return ConfigNode(.scalar("*alias", plain: false), line: line, column: column)
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
        default:
            return ConfigIssue(file: file, path: "", line: 0, column: 0, message: "not valid YAML: \(error)")
        }
    }
}
