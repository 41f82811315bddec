import Foundation
import Testing

/// `check-config --diff OLD NEW`: both files checked, then one line per change; exit 0
/// however they differ, 1 when either has a mistake.
@Suite struct CheckConfigDiffTests {
    static let token = "mixpanel-token-0123456789"

    @Test func printsEachChangeAndNoSecret() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let old = env.directory.appendingPathComponent("old.yaml").path
        let new = env.directory.appendingPathComponent("new.yaml").path
        let bad = env.directory.appendingPathComponent("bad.yaml").path
        try env.yaml().write(toFile: old, atomically: true, encoding: .utf8)
        try (env.yaml().replacingOccurrences(of: "port: 0", with: "port: 9090") + "\n  - sinks: [mp]\n")
            .replacingOccurrences(
                of: "sinks:\n", with: "sinks:\n  mp: { type: mixpanel, token: \"\(Self.token)\" }\n"
            )
            .write(toFile: new, atomically: true, encoding: .utf8)
        try env.yaml().replacingOccurrences(of: "port: 0", with: "port: abc")
            .write(toFile: bad, atomically: true, encoding: .utf8)
        let commands = CommandLineTests()

        let same = try await commands.run(["check-config", "--diff", old, old])
        #expect(same.status == 0)
        #expect(same.stdout == "\(old) -> \(old): no changes\n")

        let diff = try await commands.run(["check-config", "--diff", old, new])
        #expect(diff.status == 0, "\(diff.stderr)")
        #expect(diff.stdout.hasPrefix("\(old) -> \(new): 3 changes\n"), "\(diff.stdout)")
        #expect(diff.stdout.contains("\nsink mp: added (mixpanel)\n"), "\(diff.stdout)")
        #expect(diff.stdout.contains("\nroute added: all records but test payloads and quarantined postbacks -> mp"))
        #expect(diff.stdout.contains("\nserver.port: 0 -> 9090 (takes effect at the next start)\n"))
        #expect(!diff.stdout.contains(Self.token) && !diff.stderr.contains(Self.token))

        // Either file wrong: its problems, with their lines, and exit 1.
        let refused = try await commands.run(["check-config", "--diff", bad, new])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("bad.yaml:1:"), "\(refused.stderr)")
        #expect(refused.stdout.isEmpty)
        #expect(try await commands.run(["check-config", "--diff", old]).status != 0)
    }
}
