import GatewayCore
import Testing

/// Warnings about lasting faults get through once, not on every commit.
@Suite struct OncePerIntervalTests {
    @Test func letsTheFirstThroughAndHoldsTheRestWithinTheInterval() {
        let gate = OncePerInterval(.seconds(3600))
        #expect(gate.allow())
        #expect(!gate.allow())
        #expect(!gate.allow())
    }
}
