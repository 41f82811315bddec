import Foundation

/// Polls until `condition` holds, for at most `seconds`: a bound for work to finish, never
/// a claim about the machine's speed.
func eventually(seconds: Double = 60, _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}
