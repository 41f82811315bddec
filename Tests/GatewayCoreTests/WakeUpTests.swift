import Synchronization
import Testing

@testable import GatewayCore

/// A worker's wait ends on its timeout even when the timer fires before the waiter is in
/// place (a zero or tiny timeout: a retry already due), and on a signal sent before it waits.
@Suite struct WakeUpTests {
    final class Flag: Sendable {
        let value = Atomic(false)
    }

    /// True when `wait` returned by itself; false when the 10 s watchdog had to end it.
    func returnsByItself(_ wakeUp: WakeUp, timeout: Duration) async -> Bool {
        let returned = Flag()
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await wakeUp.wait(timeout: timeout)
                returned.value.store(true, ordering: .sequentiallyConsistent)
                return true
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(10))
                return false
            }
            var first = await group.next() ?? false
            if !first {
                // A stall of the whole pool (other tests blocking its threads) makes the
                // timeout and the watchdog due together, in either order: a wait that was
                // only held up returns within a moment; a lost one never does.
                try? await Task.sleep(for: .seconds(1))
                first = returned.value.load(ordering: .sequentiallyConsistent)
            }
            group.cancelAll()
            return first
        }
    }

    @Test func aTimeoutThatFiresBeforeTheWaiterIsInPlaceStillEndsTheWait() async {
        // The race is narrow: many tries, several waiters at once so that timers run on
        // the other threads while the waits are between their two steps.
        let lost = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let wakeUp = WakeUp()
                    var lost = 0
                    for _ in 0..<20_000 where !(await returnsByItself(wakeUp, timeout: .zero)) {
                        lost += 1
                    }
                    return lost
                }
            }
            return await group.reduce(0, +)
        }
        #expect(lost == 0)
    }

    @Test func aSignalSentBeforeTheWaitIsKept() async {
        let wakeUp = WakeUp()
        wakeUp.signal()
        #expect(await returnsByItself(wakeUp, timeout: .seconds(3600)))
    }
}
