import GatewayCore
import Synchronization
import Testing

/// Warnings about lasting faults get through once, not on every commit.
@Suite struct OncePerIntervalTests {
    @Test func letsTheFirstThroughAndHoldsTheRestWithinTheInterval() {
        let gate = OncePerInterval(.seconds(3600))
        #expect(gate.allow())
        #expect(!gate.allow())
        #expect(!gate.allow())
    }

    @Test func saysHowManyItHeldBackWhenItLetsTheNextThrough() {
        let clock = Mutex(ContinuousClock.now)
        let gate = OncePerInterval(.seconds(1)) { clock.withLock { $0 } }
        #expect(gate.pass() == 0)
        #expect(gate.pass() == nil)
        #expect(gate.pass() == nil)
        clock.withLock { $0 += .seconds(2) }
        #expect(gate.pass() == 2)
        #expect(gate.pass() == nil)
    }
}
