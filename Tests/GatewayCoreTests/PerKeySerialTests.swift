import Synchronization
import Testing

@testable import GatewayCore

/// Work for one key runs one at a time; other keys are not held up by it.
@Suite struct PerKeySerialTests {
    /// What happened, in order, and a gate the test opens.
    final class Log: Sendable {
        let events = Mutex<[String]>([])
        let open = Mutex(false)

        var all: [String] { events.withLock { $0 } }
        func note(_ event: String) { events.withLock { $0.append(event) } }
        func waitForOpen() async {
            while !open.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(2)) }
        }
    }

    @Test func workForOneKeyWaitsForTheWorkBeforeItAndOtherKeysDoNot() async throws {
        let serial = PerKeySerial<Int>()
        let log = Log()
        async let first: Void = serial.run(7) {
            log.note("first began")
            await log.waitForOpen()
            log.note("first ended")
        }
        while log.all.isEmpty { try await Task.sleep(for: .milliseconds(2)) }
        async let second: Void = serial.run(7) { log.note("second began") }
        // Another key goes through while key 7's first work is held.
        try await serial.run(8) { log.note("other key") }
        #expect(log.all == ["first began", "other key"])
        log.open.withLock { $0 = true }
        try await first
        try await second
        #expect(log.all == ["first began", "other key", "first ended", "second began"])
        // An error reaches its own caller only.
        struct Failed: Error {}
        await #expect(throws: Failed.self) { try await serial.run(7) { throw Failed() } }
        #expect(try await serial.run(7) { 42 } == 42)
    }
}
