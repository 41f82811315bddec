import Foundation
import GatewaySpawn
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The built `attribution-gateway` executable running `serve` in a child process, so that
/// a test can kill it for real.
final class GatewayProcess {
    /// Set by `start()`.
    private(set) var process: ChildProcess!
    private let executable: String
    private let arguments: [String]
    private let log: FileHandle
    let logURL: URL
    private(set) var port = 0

    /// The executable that `swift build` put beside the test bundle.
    static var executableURL: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("attribution-gateway")
    }

    /// `fileSizeLimit`: the most bytes any file the gateway writes may reach (`ulimit -f`),
    /// past which a write fails as on a full disk.
    /// `options`: more of `serve`'s options (`--watch-config`).
    init(config: String, logURL: URL, fileSizeLimit: Int? = nil, options: [String] = []) throws {
        self.logURL = logURL
        if !FileManager.default.fileExists(atPath: logURL.path) {
            _ = FileManager.default.createFile(atPath: logURL.path, contents: nil)
        }
        if let fileSizeLimit {
            // Set in bytes by Python (a shell's `ulimit -f` counts blocks of 512 or 1024
            // bytes, by shell). The signal a write past the limit sends would end the
            // gateway: ignored, as an exec keeps it, the write fails with EFBIG instead.
            let limit =
                "import os, resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
                + "resource.setrlimit(resource.RLIMIT_FSIZE, (\(fileSizeLimit), \(fileSizeLimit))); "
                + "os.execv(sys.argv[1], sys.argv[1:])"
            executable = "/usr/bin/env"
            arguments = ["python3", "-c", limit, Self.executableURL.path, "serve", "--config", config] + options
        } else {
            executable = Self.executableURL.path
            arguments = ["serve", "--config", config] + options
        }
        log = try FileHandle(forWritingTo: logURL)
        log.seekToEndOfFile()
    }

    /// A test that fails half-way must not leave a server running.
    deinit {
        if let process, process.isRunning {
            process.signal(SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Starts the server and waits (bounded) until it says which port it listens on.
    func start() async throws {
        process = try ChildProcess(
            executable: executable, arguments: arguments, stdout: .descriptor(log.fileDescriptor),
            stderr: .descriptor(log.fileDescriptor))
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            let text = (try? String(contentsOf: logURL, encoding: .utf8)) ?? ""
            if let range = text.range(of: "listening on 127.0.0.1:", options: .backwards) {
                let rest = text[range.upperBound...]
                let digits = rest.prefix { $0.isNumber }
                // Only once the number is followed by something (the JSON line's quote, or
                // the text line's end): it may still be half written.
                if let next = rest.dropFirst(digits.count).first, next == "\"" || next.isNewline,
                    let port = Int(digits)
                {
                    self.port = port
                    return
                }
            }
            guard process.isRunning else { throw Failure("the gateway exited: \(text)") }
            try await Task.sleep(for: .milliseconds(50))
        }
        kill(SIGKILL)
        throw Failure("the gateway did not start")
    }

    /// Sends `signal` without waiting for anything.
    func signal(_ signal: Int32) {
        process.signal(signal)
    }

    /// Sends `signal` and blocks until the process ends: for `SIGKILL`, which ends it at
    /// once. A graceful stop is `stop`, which waits without holding a thread.
    func kill(_ signal: Int32) {
        process.signal(signal)
        process.waitUntilExit()
    }

    /// Sends `signal` and waits, for at most `seconds` (a bound, not a speed claim), for
    /// the process to end; kills it and returns false if it has not.
    func stop(_ signal: Int32, within seconds: Double = 60) async throws -> Bool {
        process.signal(signal)
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        guard !process.isRunning else {
            kill(SIGKILL)
            // What the server last did is what a failed stop needs: its log goes with the
            // test's directory.
            let text = (try? String(contentsOf: logURL, encoding: .utf8)) ?? ""
            let tail = text.split(separator: "\n", omittingEmptySubsequences: false).suffix(80)
            FileHandle.standardError.write(
                Data("gateway did not exit within \(seconds) s of signal \(signal); its log ends:\n".utf8))
            FileHandle.standardError.write(Data(tail.joined(separator: "\n").utf8))
            return false
        }
        process.waitUntilExit()
        return true
    }

    /// GETs a path; returns the status and the JSON answer.
    func get(_ path: String, headers: [String: String] = [:]) async throws -> (Int, [String: Any]) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        let json = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        return (status, json)
    }

    /// GETs a path; returns its body as text (`/metrics`).
    func text(_ path: String) async throws -> String {
        let (data, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        return String(decoding: data, as: UTF8.self)
    }

    /// POSTs a body; returns the status and the JSON answer.
    func post(_ path: String, body: String, headers: [String: String] = [:]) async throws -> (Int, [String: Any]) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = "POST"
        request.httpBody = Data(body.utf8)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        let json = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        return (status, json)
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
