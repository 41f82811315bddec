import Foundation
import GatewayCore
import GatewaySinks
import Testing

/// What a plugin says back is matched to the batch by record id.
@Suite struct ExecSinkAcknowledgementTests {
    /// An acknowledgement naming a record not in the batch counted towards it: the batch's
    /// last record was then sent again in every batch for as long as the plugin lived.
    @Test(.timeLimit(.minutes(1))) func anAcknowledgementForAnotherRecordIsIgnored() async throws {
        let folder = try Self.makeFolder("exec-acks")
        defer { try? FileManager.default.removeItem(at: folder) }
        let seen = folder.appendingPathComponent("seen.txt").path
        // Once, before its first real answer, it acknowledges an id it never got.
        let script = """
            import json, sys
            stray = True
            with open(\(String(reflecting: seen)), "a") as seen:
                for line in sys.stdin:
                    record_id = json.loads(line)["record_id"]
                    seen.write(record_id + "\\n"); seen.flush()
                    if stray:
                        print(json.dumps({"record_id": "not-in-this-batch", "status": "ok"}), flush=True)
                        stray = False
                    print(json.dumps({"record_id": record_id, "status": "ok"}), flush=True)
            """
        let sink = ExecSink(
            options: .init(command: ["python3", "-c", script], timeout: .seconds(20), maxBatchSize: 10))
        let batches = (0..<3).map { batch in
            (0..<3).map { index in
                AttributionRecord(provider: "iad", kind: .install, dedupeKey: "k\(batch)-\(index)", receivedAt: Date())
            }
        }
        for batch in batches {
            #expect(try await sink.deliver(batch) == Array(repeating: .delivered, count: 3))
        }
        await sink.shutdown()
        let received = try String(contentsOfFile: seen, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(received == batches.flatMap { $0.map(\.recordID) })
    }

    /// A new folder of its own in the temporary directory; the test removes it.
    static func makeFolder(_ name: String) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    static func records(_ count: Int, padding: Int = 0) -> [AttributionRecord] {
        (0..<count).map { index in
            var record = AttributionRecord(
                provider: "iad", kind: .install, dedupeKey: "k\(index)-\(UUID())", receivedAt: Date())
            if padding > 0 { record.campaignName = String(repeating: "c", count: padding) }
            return record
        }
    }

    /// A banner on stdout does not fail every batch, acknowledged records and all.
    @Test(.timeLimit(.minutes(1))) func aLineThatIsNoAcknowledgementIsSkipped() async throws {
        let script = """
            import json, sys
            print("plugin v1.2 starting", flush=True)
            for line in sys.stdin:
                print("debug: got a record", flush=True)
                print(json.dumps({"record_id": json.loads(line)["record_id"], "status": "ok"}), flush=True)
            """
        let sink = ExecSink(
            options: .init(command: ["python3", "-c", script], timeout: .seconds(20), maxBatchSize: 10))
        #expect(try await sink.deliver(Self.records(5)) == Array(repeating: .delivered, count: 5))
        await sink.shutdown()
    }

    /// Answers are read while the batch is written: written whole first, a plugin answering
    /// each line as it reads it would fill its stdout (64 KB) and both sides would wait for
    /// good, its acknowledged records going to the dead letters.
    ///
    /// Long answers may pass the 16 MiB bound on unread output, or come faster than they are
    /// taken: past the bound the reader waits, and the plugin with it, rather than the
    /// plugin being stopped.
    @Test(.timeLimit(.minutes(3)), arguments: [100, 4000, 8000])
    func aPluginAnsweringWhileTheBatchIsWrittenIsNeverBlocked(reasonLength: Int) async throws {
        let script = """
            import json, sys
            for line in sys.stdin:
                print(json.dumps({"record_id": json.loads(line)["record_id"], "status": "ok", "reason": "x" * \(reasonLength)}), flush=True)
            """
        let sink = ExecSink(
            options: .init(command: ["python3", "-c", script], timeout: .seconds(120), maxBatchSize: 5000))
        // About 700 KB of answers, and 5 MB of records: time enough for a loaded machine.
        #expect(try await sink.deliver(Self.records(5000, padding: 1000)) == Array(repeating: .delivered, count: 5000))
        await sink.shutdown()
    }

    /// Answers read while the batch is still being written stand when the write times out:
    /// their records are not sent again.
    @Test(.timeLimit(.minutes(2))) func answersBeforeAWriteTimesOutStand() async throws {
        // Answers the first three, then stops reading.
        let script = """
            import json, sys, time
            for count, line in enumerate(sys.stdin):
                if count == 3:
                    time.sleep(60)
                print(json.dumps({"record_id": json.loads(line)["record_id"], "status": "ok"}), flush=True)
            """
        // Time enough for a slow machine's Python to start and answer three.
        let sink = ExecSink(
            options: .init(command: ["python3", "-c", script], timeout: .seconds(30), maxBatchSize: 500))
        let records = Self.records(500, padding: 2000)
        let outcomes = try await sink.deliver(records)
        #expect(outcomes.prefix(3) == [.delivered, .delivered, .delivered])
        #expect(outcomes.dropFirst(3).allSatisfy { if case .retry = $0 { true } else { false } })
        await sink.shutdown()
    }

    /// A plugin whose daemon (a session of its own, out of reach of the group kill) keeps
    /// its pipes must not leave a Dispatch thread blocked at each restart, until every
    /// task of the gateway stalls. The pipes' readers end with the plugin and let
    /// go of them: asked of the pipes themselves, since the process's thread count is
    /// every parallel test's.
    @Test(.timeLimit(.minutes(2))) func aPluginsDaemonHoldingItsPipesLeavesNoPipeOrReaderBehind() async throws {
        let folder = try Self.makeFolder("exec-daemon")
        defer { try? FileManager.default.removeItem(at: folder) }
        let pids = folder.appendingPathComponent("daemons.txt").path
        let script = """
            import os, subprocess, sys
            daemon = subprocess.Popen(["sleep", "60"], start_new_session=True)
            with open(\(String(reflecting: pids)), "a") as f:
                f.write(str(daemon.pid) + "\\n")
            sys.exit(3)
            """
        defer {
            for pid in ((try? String(contentsOfFile: pids, encoding: .utf8)) ?? "").split(separator: "\n") {
                if let pid = Int32(pid) { kill(pid, SIGKILL) }
            }
        }
        // The daemons' stdout and stderr: pipes the gateway read, whose ends it must let go
        // of (a read blocked on one held a thread, and the pipe, for good).
        func links(_ folder: String) -> Set<String> {
            Set(
                ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).compactMap {
                    try? FileManager.default.destinationOfSymbolicLink(atPath: "\(folder)/\($0)")
                })
        }
        // Each batch waits out its timeout (the daemon keeps stdout open); time enough for
        // a slow machine's Python to start the daemon before the plugin is stopped.
        let sink = ExecSink(
            options: .init(command: ["python3", "-c", script], timeout: .seconds(10), maxBatchSize: 10))
        for _ in 0..<3 { _ = try? await sink.deliver(Self.records(1)) }
        await sink.shutdown()
        let daemonPipes = ((try? String(contentsOfFile: pids, encoding: .utf8)) ?? "").split(separator: "\n").reduce(
            into: Set<String>()
        ) { pipes, pid in
            pipes.formUnion(links("/proc/\(pid)/fd").filter { $0.hasPrefix("pipe:") })
        }
        #expect(daemonPipes.count >= 3, "\(daemonPipes)")
        // Let go of within the readers' poll (a second), stderr's after its second of grace.
        var held: Set<String> = []
        let released = try await eventually {
            held = links("/proc/self/fd").intersection(daemonPipes)
            return held.isEmpty
        }
        #expect(released, "still held: \(held)")
    }

    /// A plugin's last acknowledgement, printed without a line break before it exits,
    /// counts: its record is not sent again.
    @Test(.timeLimit(.minutes(1))) func aLastAcknowledgementWithoutALineBreakCounts() async throws {
        let script = """
            import json, sys
            ids = [json.loads(sys.stdin.readline())["record_id"] for _ in range(2)]
            print(json.dumps({"record_id": ids[0], "status": "ok"}), flush=True)
            sys.stdout.write(json.dumps({"record_id": ids[1], "status": "ok"}))
            sys.stdout.flush()
            """
        let sink = ExecSink(options: .init(command: ["python3", "-c", script], timeout: .seconds(20)))
        let records = (0..<2).map {
            AttributionRecord(provider: "iad", kind: .install, dedupeKey: "last\($0)", receivedAt: Date())
        }
        #expect(try await sink.deliver(records) == [.delivered, .delivered])
        await sink.shutdown()
    }

    /// A plugin writing without a line break must neither grow the gateway without bound
    /// nor run its batch past its timeout. The plugin is stopped once a line passes 1 MiB,
    /// long before the batch's timeout; its earlier answers stand, and the next batch
    /// starts it again.
    @Test(.timeLimit(.minutes(1))) func aPluginWritingWithoutALineBreakIsStoppedNotHeld() async throws {
        let folder = try Self.makeFolder("exec-flood")
        defer { try? FileManager.default.removeItem(at: folder) }
        let started = folder.appendingPathComponent("started").path
        // Its first run answers the first record, then writes 64 KiB at a time without end.
        let script = """
            import json, os, sys
            first = not os.path.exists(\(String(reflecting: started)))
            open(\(String(reflecting: started)), "a").close()
            for line in sys.stdin:
                print(json.dumps({"record_id": json.loads(line)["record_id"], "status": "ok"}), flush=True)
                if first:
                    while True:
                        sys.stdout.write("x" * 65536); sys.stdout.flush()
            """
        let sink = ExecSink(
            options: .init(command: ["python3", "-c", script], timeout: .seconds(50), maxBatchSize: 10))
        let records = Self.records(2)
        let outcomes = try await sink.deliver(records)
        #expect(outcomes[0] == .delivered)
        guard case .retry(let reason, _) = outcomes[1] else {
            Issue.record("expected a retry, got \(outcomes[1])")
            return
        }
        #expect(reason.contains("a line of over"), "\(reason)")
        #expect(try await sink.deliver([records[1]]) == [.delivered])
        await sink.shutdown()
    }

    /// A plugin printing empty lines, which count as nothing, must not grow the gateway's
    /// memory; one printing lines that are no acknowledgement must not keep its batch going
    /// past its timeout for good, so the deadline is looked at while lines keep coming too.
    /// Its answers before that still stand. The empty lines come a thousand at a time, not
    /// in a busy loop, which for the whole timeout would starve a loaded machine's other tests.
    @Test(
        .timeLimit(.minutes(2)),
        arguments: [
            "sys.stdout.write('\\n' * 1000); sys.stdout.flush(); time.sleep(0.01)",
            "print('debug: still here', flush=True); time.sleep(0.01)",
        ])
    func aPluginPrintingLinesThatAreNoAnswerStillEndsItsBatch(_ chatter: String) async throws {
        let script = """
            import json, sys, time
            first = sys.stdin.readline()
            print(json.dumps({"record_id": json.loads(first)["record_id"], "status": "ok"}), flush=True)
            while True:
                \(chatter)
            """
        // Long enough for Python to start and answer on a loaded machine: the batch must
        // end by its deadline, with the first record's answer standing.
        let sink = ExecSink(
            options: .init(command: ["python3", "-c", script], timeout: .seconds(30), maxBatchSize: 10))
        let outcomes = try await sink.deliver(Self.records(2))
        await sink.shutdown()
        #expect(outcomes[0] == .delivered)
        guard case .retry(let reason, _) = outcomes[1] else {
            Issue.record("expected a retry, got \(outcomes[1])")
            return
        }
        #expect(reason.contains("timed out") || reason.contains("not read"), "\(reason)")
    }

    /// A plugin that exits while its batch is still being written is said to have exited,
    /// not to have failed the write ("Broken pipe"), which its exit caused.
    @Test(.timeLimit(.minutes(1))) func aPluginThatExitsMidBatchIsSaidToHaveExited() async throws {
        let script = """
            import json, sys
            first = sys.stdin.readline()
            print(json.dumps({"record_id": json.loads(first)["record_id"], "status": "ok"}), flush=True)
            sys.exit(3)
            """
        let sink = ExecSink(
            options: .init(command: ["python3", "-c", script], timeout: .seconds(20), maxBatchSize: 500))
        let outcomes = try await sink.deliver(Self.records(500, padding: 2000))
        await sink.shutdown()
        #expect(outcomes[0] == .delivered)
        guard case .retry(let reason, _) = outcomes[1] else {
            Issue.record("expected a retry, got \(outcomes[1])")
            return
        }
        #expect(reason.contains("plugin exited"), "\(reason)")
    }

    /// A program whose name holds a `=` is run itself: run through `/usr/bin/env`, it would
    /// be read as a variable to set, and env would print the environment, the sink's secrets
    /// with it, to stdout, where the gateway logs it.
    @Test(.timeLimit(.minutes(1))) func aProgramWithAnEqualsSignInItsNameIsRunItself() async throws {
        let folder = try Self.makeFolder("exec-equals")
        defer { try? FileManager.default.removeItem(at: folder) }
        let program = folder.appendingPathComponent("fwd=v2.py").path
        try """
        #!/usr/bin/env python3
        import json, sys
        for line in sys.stdin:
            print(json.dumps({"record_id": json.loads(line)["record_id"], "status": "ok"}), flush=True)
        """.write(toFile: program, atomically: true, encoding: .utf8)
        #expect(chmod(program, 0o755) == 0)
        let captured = CapturedLog()
        let sink = ExecSink(
            options: .init(command: [program], timeout: .seconds(20), maxBatchSize: 10), logger: captured.logger)
        #expect(try await sink.deliver(Self.records(3)) == Array(repeating: .delivered, count: 3))
        await sink.shutdown()
        #expect(!captured.entries.withLock { $0.contains { $0.message.contains("not an acknowledgement") } })
    }
}
