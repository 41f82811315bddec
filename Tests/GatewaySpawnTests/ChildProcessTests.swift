import Foundation
import GatewaySpawn
import Testing

/// What the exec sink's plugins (and the gateway's own tests) rely on from a started child.
@Suite struct ChildProcessTests {
    /// Runs `script` in `sh` and returns its output and the finished process.
    func run(_ script: String, newProcessGroup: Bool = false) throws -> (String, ChildProcess) {
        let out = Pipe()
        let process = try ChildProcess(
            executable: "/bin/sh", arguments: ["-c", script],
            stdout: .descriptor(out.fileHandleForWriting.fileDescriptor), newProcessGroup: newProcessGroup)
        try out.fileHandleForWriting.close()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (text, process)
    }

    @Test func aChildHoldsNoDescriptorOfOursButItsStandardThree() throws {
        // A pipe a plugin inherited would never see EOF from its other end's owner.
        let held = Pipe()
        defer { try? held.fileHandleForWriting.close() }
        let (text, _) = try run("ls /proc/$$/fd")
        let descriptors = Set(text.split(separator: "\n"))
        #expect(descriptors == ["0", "1", "2"], "\(descriptors), ours: \(held.fileHandleForReading.fileDescriptor)")
    }

    @Test func aChildDoesNotInheritTheSignalsWeIgnore() throws {
        // The gateway ignores SIGPIPE; a plugin writing to a closed pipe must still end.
        let previous = signal(SIGPIPE, SIG_IGN)
        defer { signal(SIGPIPE, previous) }
        let (text, _) = try run("grep SigIgn /proc/$$/status")
        let ignored = text.split(whereSeparator: \.isWhitespace).last.flatMap { UInt64($0, radix: 16) }
        // Bit n-1 is signal n; glibc keeps 32 and up for itself.
        #expect(ignored.map { $0 & (1 << (SIGPIPE - 1)) } == 0, "\(text)")
        #expect(ignored.map { $0 & 0x7FFF_FFFF } == 0, "\(text)")
    }

    @Test func anExitCodeAndAKillingSignalAreTold() throws {
        let (_, exited) = try run("exit 3")
        #expect(exited.terminationStatus == 3)
        #expect(!exited.wasSignalled)
        let (_, killed) = try run("kill -9 $$")
        #expect(killed.terminationStatus == 9)
        #expect(killed.wasSignalled)
    }

    @Test func aNewGroupIsLedByTheChildAndEndsWithEverythingInIt() throws {
        let out = Pipe()
        // The child starts a grandchild that holds stdout, as a plugin's helper may.
        let process = try ChildProcess(
            executable: "/bin/sh", arguments: ["-c", "cut -d' ' -f5 /proc/$$/stat; sleep 600 & wait"],
            stdout: .descriptor(out.fileHandleForWriting.fileDescriptor), newProcessGroup: true)
        try out.fileHandleForWriting.close()
        let reader = out.fileHandleForReading
        var firstLine = Data()
        while !firstLine.contains(UInt8(ascii: "\n")) {
            let chunk = reader.availableData
            guard !chunk.isEmpty else { break }
            firstLine.append(chunk)
        }
        #expect(
            String(decoding: firstLine, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                == "\(process.processIdentifier)")
        process.signal(SIGKILL, group: true)
        // EOF only comes once the grandchild holding stdout is gone too.
        _ = reader.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 9)
    }

    @Test func aReapedChildIsNeverSignalledAgain() throws {
        let (_, process) = try run("exit 0")
        #expect(!process.isRunning)
        // Its id may belong to another process by now; signalling it must be a no-op, and
        // the status stays the one it exited with.
        process.signal(SIGKILL, group: true)
        #expect(process.terminationStatus == 0)
        #expect(!process.wasSignalled)
    }

    @Test func aProgramThatCannotStartIsNamedWithoutItsArguments() {
        #expect {
            _ = try ChildProcess(executable: "/nonexistent/plugin", arguments: ["--token", "s3cret"])
        } throws: { error in
            "\(error)".contains("/nonexistent/plugin") && !"\(error)".contains("s3cret")
        }
    }
}
