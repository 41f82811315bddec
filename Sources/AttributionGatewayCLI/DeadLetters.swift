import ArgumentParser
import Foundation
import GatewayCore
import GatewayServer
import GatewayStorage

struct DeadLetters: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dlq",
        abstract: "List, retry or drop records that a sink gave up on.",
        subcommands: [List.self, Retry.self, Drop.self])

    struct Selection: ParsableArguments {
        @Option(name: .shortAndLong, help: "The configuration file.")
        var config = "config.yaml"
        @Option(help: "Only this sink's dead letters.")
        var sink: String?
        // Unconditional: "-5" is a value to refuse by name, not "missing value for --id".
        @Option(
            name: .customLong("id"), parsing: .unconditionalSingleValue, help: "Only these dead letters (repeatable).")
        var ids: [Int64] = []

        func validate() throws {
            if let bad = ids.first(where: { $0 <= 0 }) { throw ValidationError("--id \(bad): ids are positive") }
        }

        /// The store, once a `--sink` is known to name something: a sink of config.yaml, or
        /// one since taken out of it that still has dead letters. A misspelt name would
        /// otherwise answer "0 dead letters", exit 0, as if there were nothing to do.
        func withStore<T>(_ body: (any AttributionStore) async throws -> T) async throws -> T {
            let configuration = try loadConfiguration(config, enrichers: false)
            return try await withExistingStore(configuration) { store in
                let names = configuration.sinks.map(\.name)
                if let sink, !names.contains(sink), try await store.deadLetters(sink: sink, limit: 1).isEmpty {
                    printError(
                        "no sink '\(sink)' in \(config) and no dead letters for one; sinks: \(names.joined(separator: ", "))"
                    )
                    throw ExitCode(1)
                }
                return try await body(store)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print dead letters, newest first, as JSON lines.")
        @OptionGroup var selection: Selection
        @Option(parsing: .unconditional, help: "At most this many.")
        var limit = 100

        func validate() throws {
            guard limit > 0 else { throw ValidationError("--limit \(limit): at least 1") }
        }

        /// One letter as a JSON line; numbers as numbers, so that `jq 'select(.attempts > 2)'`
        /// compares them.
        struct Line: Encodable {
            let id: Int64
            let sink: String
            let record_id: String
            let attempts: Int
            let error: String
            let failed_at: String
        }

        func run() async throws {
            let letters = try await selection.withStore {
                try await $0.deadLetters(
                    sink: selection.sink, ids: selection.ids.isEmpty ? nil : selection.ids, limit: limit)
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            for letter in letters {
                let line = Line(
                    id: letter.id, sink: letter.sink, record_id: letter.recordID, attempts: letter.attempts,
                    error: letter.error, failed_at: ISO8601.format(letter.failedAt))
                print(TerminalText.visibleJSON(String(decoding: try encoder.encode(line), as: UTF8.self)))
            }
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Move dead letters back to their sink's outbox; the running gateway delivers them.")
        @OptionGroup var selection: Selection
        @Flag(help: "Every dead letter of every sink (needed when neither --sink nor --id is given).")
        var all = false

        func run() async throws {
            try requireSelection(selection, all: all)
            let configured = try loadConfiguration(selection.config, enrichers: false).sinks.map(\.name)
            let ids = selection.ids.isEmpty ? nil : selection.ids
            let (moved, left) = try await selection.withStore { store in
                // An outbox of a sink no longer in the config has no worker: letters moved
                // there left `dlq list` and went nowhere, and its outbox age alert fired for good.
                if let sink = selection.sink, !configured.contains(sink) {
                    printError(
                        "'\(sink)' is not a sink of \(selection.config): nothing would deliver them; add it back, or drop them"
                    )
                    throw ExitCode(1)
                }
                let moved = try await store.retryDeadLetters(
                    ids: ids, sink: selection.sink, among: configured, now: Date())
                let left = try await store.deadLetterCounts(ids: ids).filter {
                    !configured.contains($0.key) && (selection.sink == nil || $0.key == selection.sink)
                }
                return (moved, left)
            }
            print("\(moved) dead letters queued for delivery again")
            if !left.isEmpty {
                let sinks = left.keys.sorted().joined(separator: ", ")
                print(
                    "\(left.values.reduce(0, +)) left for sinks no longer in the config (\(sinks)): add them back, or drop them"
                )
            }
        }
    }

    struct Drop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete dead letters for good.")
        @OptionGroup var selection: Selection
        @Flag(help: "Every dead letter of every sink (needed when neither --sink nor --id is given).")
        var all = false

        func run() async throws {
            try requireSelection(selection, all: all)
            let dropped = try await selection.withStore {
                try await $0.dropDeadLetters(ids: selection.ids.isEmpty ? nil : selection.ids, sink: selection.sink)
            }
            print("\(dropped) dead letters dropped")
        }
    }
}

/// Refuses to act on every dead letter unless the user said so.
func requireSelection(_ selection: DeadLetters.Selection, all: Bool) throws {
    if selection.sink == nil && selection.ids.isEmpty && !all {
        throw ValidationError("name --sink, --id, or --all")
    }
}
