import CSpawn
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A program this process started, by `posix_spawn`: Foundation's `Process.run()` crashes
/// now and then on Linux (swift-corelibs-foundation#5472), taking the gateway with it.
///
/// Its id is never signalled once it has been reaped: the id may be another process's by
/// then. Until it is reaped, an exited child stays a zombie, which keeps the id its own.
public final class ChildProcess: Sendable {
    /// What a child's standard input, output or error is.
    public enum Standard: Sendable {
        /// The same as this process's.
        case inherited
        /// A descriptor of this process (a pipe's end, an open file).
        case descriptor(Int32)
    }

    /// Starting a program failed; `description` names the program, never its arguments
    /// (they may hold secrets).
    public struct StartFailure: Error, CustomStringConvertible {
        public let description: String
    }

    public let processIdentifier: pid_t
    /// The wait status once reaped.
    private let status = Mutex<Int32?>(nil)

    /// Starts `executable` (a path) with `arguments` and this process's environment and
    /// working directory. With `newProcessGroup`, the child leads a group of its own, which
    /// `signal(_:group:)` can end with everything it started.
    public init(
        executable: String, arguments: [String], stdin: Standard = .inherited, stdout: Standard = .inherited,
        stderr: Standard = .inherited, newProcessGroup: Bool = false
    ) throws {
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var id: pid_t = 0
        let rc = cspawn_start(
            &id, executable, argv, stdin.descriptor, stdout.descriptor, stderr.descriptor, newProcessGroup ? 1 : 0)
        guard rc == 0 else {
            throw StartFailure(description: "cannot start \(executable): \(String(cString: strerror(rc)))")
        }
        processIdentifier = id
    }

    /// Reaps the child if it has exited (without blocking); false once it has.
    public var isRunning: Bool {
        status.withLock { status in
            if status != nil { return false }
            var raw: Int32 = 0
            var reaped = waitpid(processIdentifier, &raw, WNOHANG)
            while reaped == -1 && errno == EINTR { reaped = waitpid(processIdentifier, &raw, WNOHANG) }
            switch reaped {
            case 0: return true
            case processIdentifier:
                status = raw
                return false
            default:
                // ECHILD: reaped by someone else; treated as gone, never signalled again.
                status = -1
                return false
            }
        }
    }

    /// Sends `signal` to the child (and its group, with `group`) unless it has been reaped.
    public func signal(_ signal: Int32, group: Bool = false) {
        status.withLock { status in
            guard status == nil else { return }
            if group { kill(-processIdentifier, signal) }
            kill(processIdentifier, signal)
        }
    }

    /// Blocks until the child has exited, and reaps it.
    public func waitUntilExit() {
        // Waited for without reaping, outside the lock, so that `signal` never blocks on it.
        _ = cspawn_wait_exited(processIdentifier)
        _ = isRunning
    }

    /// The exit code, or the signal's number when a signal ended it (as Foundation's
    /// `Process` has it); nil while it runs.
    public var terminationStatus: Int32? {
        guard !isRunning, let raw = status.withLock({ $0 }), raw >= 0 else { return nil }
        let signal = raw & 0x7f
        return signal == 0 ? (raw >> 8) & 0xff : signal
    }

    /// True when a signal ended the child.
    public var wasSignalled: Bool {
        guard !isRunning, let raw = status.withLock({ $0 }), raw >= 0 else { return false }
        return raw & 0x7f != 0
    }
}

extension ChildProcess.Standard {
    fileprivate var descriptor: Int32 {
        switch self {
        case .inherited: -1
        case .descriptor(let fd): fd
        }
    }
}
