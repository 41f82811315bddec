import Foundation
import Testing

/// docs/cli.md against the executable's own help: every command and option it has is in
/// the manual, and the manual names no option it lacks, so the two cannot drift apart.
@Suite struct CLIManualTests {
    static let manual: String = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return (try? String(contentsOf: root.appendingPathComponent("docs/cli.md"), encoding: .utf8)) ?? ""
    }()

    /// The help of `path`, as the argument parser prints it.
    static func help(_ path: [String]) async throws -> String {
        try await CommandLineTests().run(["help"] + path).stdout
    }

    /// The subcommands a help text lists.
    static func subcommands(in help: String) -> [String] {
        guard let start = help.range(of: "SUBCOMMANDS:\n") else { return [] }
        return help[start.upperBound...].split(separator: "\n").compactMap { line in
            // A command's own line is indented two spaces; its description's next lines more.
            guard line.hasPrefix("  "), !line.hasPrefix("   "), let name = line.split(separator: " ").first else {
                return nil
            }
            return name.allSatisfy { $0.isLetter || $0 == "-" } ? String(name) : nil
        }.filter { $0 != "See" && $0 != "help" }
    }

    /// The long options in a text, `--help` aside.
    static func options(in text: some StringProtocol) -> Set<String> {
        var found: Set<String> = []
        var rest = text[...]
        while let range = rest.range(of: "--") {
            let name = rest[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "-" }
            if name.first?.isLetter == true, name != "help" { found.insert("--" + name) }
            rest = rest[range.upperBound...]
        }
        return found
    }

    /// Every command with no subcommands of its own, as its words (`["dlq", "retry"]`).
    static func leafCommands() async throws -> [[String]] {
        var leaves: [[String]] = []
        var queue: [[String]] = try await subcommands(in: help([])).map { [$0] }
        while let path = queue.first {
            queue.removeFirst()
            let children = try await subcommands(in: help(path))
            if children.isEmpty { leaves.append(path) } else { queue += children.map { path + [$0] } }
        }
        return leaves
    }

    /// The manual's section for a command: the `## ` heading naming the longest leading
    /// words of it, up to the next `## `.
    static func section(for path: [String]) -> Substring? {
        for length in stride(from: path.count, through: 1, by: -1) {
            let heading = "## `" + path.prefix(length).joined(separator: " ") + "`\n"
            guard let start = manual.range(of: heading) else { continue }
            let body = manual[start.upperBound...]
            let end = body.range(of: "\n## ")?.lowerBound ?? body.endIndex
            return body[..<end]
        }
        return nil
    }

    @Test func everyCommandAndOptionIsInTheManual() async throws {
        let leaves = try await Self.leafCommands()
        #expect(leaves.count >= 10, "\(leaves)")
        for path in leaves {
            let name = path.joined(separator: " ")
            guard let section = Self.section(for: path) else {
                Issue.record("docs/cli.md has no section for `\(name)`")
                continue
            }
            for option in Self.options(in: try await Self.help(path)) where !section.contains(option) {
                Issue.record("docs/cli.md does not describe `\(name) \(option)`")
            }
        }
    }

    @Test func theManualNamesNoOptionACommandLacks() async throws {
        var helpBySection: [String: Set<String>] = [:]
        for path in try await Self.leafCommands() {
            guard let section = Self.section(for: path) else { continue }
            helpBySection[String(section), default: []].formUnion(Self.options(in: try await Self.help(path)))
        }
        for (section, options) in helpBySection {
            // The synopses: the code blocks that start with the command's name.
            let synopses = section.components(separatedBy: "```").enumerated().filter { $0.offset % 2 == 1 }
                .map(\.element).filter { $0.contains("attribution-gateway ") }
            for option in Self.options(in: synopses.joined(separator: "\n")) where !options.contains(option) {
                Issue.record("docs/cli.md shows \(option), which no command of its section has")
            }
        }
    }
}
