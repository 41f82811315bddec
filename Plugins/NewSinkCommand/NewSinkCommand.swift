import Foundation
import PackagePlugin

/// `swift package --allow-writing-to-package-directory new-sink --name Slack [--type slack]`
///
/// Creates `Plugins/SlackSink/SlackSink.swift` (a sink and its `SinkPlugin`, ready to fill
/// in), `Tests/SlackSinkTests/SlackSinkTests.swift`, adds the target to `operatorSinks` in
/// Package.swift and registers it in BuiltInPlugins.swift, so that `type: slack` works.
@main
struct NewSinkCommand: CommandPlugin {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    func performCommand(context: PluginContext, arguments: [String]) async throws {
        var extractor = ArgumentExtractor(arguments)
        guard let rawName = extractor.extractOption(named: "name").first else {
            throw Failure(
                description:
                    "usage: swift package --allow-writing-to-package-directory new-sink --name Slack [--type slack]")
        }
        let base = rawName.hasSuffix("Sink") ? String(rawName.dropLast(4)) : rawName
        guard let first = base.unicodeScalars.first, CharacterSet.uppercaseLetters.contains(first),
            base.unicodeScalars.allSatisfy({ CharacterSet.alphanumerics.contains($0) && $0.isASCII })
        else {
            throw Failure(description: "--name must be an UpperCamelCase Swift name such as Slack or BigQuery")
        }
        let target = base + "Sink"
        let typeName = extractor.extractOption(named: "type").first ?? Self.kebab(base)

        let root = context.package.directoryURL
        let files = FileManager.default
        // A second plugin of one `type:` would replace the first in the registry: a new
        // `csv` sink would take every existing `type: csv` config from the shipped one.
        if let owner = Self.pluginClaiming(
            typeName, under: [root.appending(path: "Sources"), root.appending(path: "Plugins")])
        {
            throw Failure(description: "`type: \(typeName)` is taken by \(owner); choose another with --type")
        }
        let source = root.appending(path: "Plugins/\(target)/\(target).swift")
        let test = root.appending(path: "Tests/\(target)Tests/\(target)Tests.swift")
        guard !files.fileExists(atPath: source.path) else {
            throw Failure(description: "\(source.path) exists already")
        }

        let manifest = root.appending(path: "Package.swift")
        var package = try String(contentsOf: manifest, encoding: .utf8)
        guard let list = package.range(of: #"let operatorSinks = \[[^\]]*"#, options: .regularExpression) else {
            throw Failure(description: "Package.swift has no `let operatorSinks = [...]` line")
        }
        package.replaceSubrange(list, with: package[list] + ", \"\(target)\"")

        let registry = root.appending(path: "Sources/GatewayServer/Assembly/BuiltInPlugins.swift")
        var plugins = try String(contentsOf: registry, encoding: .utf8)
        guard let returnLine = plugins.range(of: "        return registry") else {
            throw Failure(description: "BuiltInPlugins.swift has no `return registry` line")
        }
        plugins.insert(
            contentsOf: "        registry.register(sink: \(target)Plugin.self)  // Plugins/\(target)\n",
            at: returnLine.lowerBound)
        // The new import joins the file's leading imports, kept in order.
        var lines = plugins.components(separatedBy: "\n")
        let imports = lines.prefix { $0.hasPrefix("import ") }
        lines.replaceSubrange(0..<imports.count, with: (imports + ["import \(target)"]).sorted())
        plugins = lines.joined(separator: "\n")

        try files.createDirectory(at: source.deletingLastPathComponent(), withIntermediateDirectories: true)
        try files.createDirectory(at: test.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Self.sinkSource(target: target, typeName: typeName).write(to: source, atomically: true, encoding: .utf8)
        try Self.testSource(target: target).write(to: test, atomically: true, encoding: .utf8)
        try package.write(to: manifest, atomically: true, encoding: .utf8)
        try plugins.write(to: registry, atomically: true, encoding: .utf8)
        print(
            """
            Created Plugins/\(target)/\(target).swift and Tests/\(target)Tests/\(target)Tests.swift,
            added "\(target)" to operatorSinks in Package.swift and registered it in BuiltInPlugins.swift.
            Fill in deliver(_:), then use it in config.yaml: sinks: { mine: { type: \(typeName), endpoint: https://… } }
            """)
    }

    /// The file of a plugin registered as `type: typeName`, if one is.
    static func pluginClaiming(_ typeName: String, under folders: [URL]) -> String? {
        let claim = "static let typeName = \"\(typeName)\""
        for folder in folders {
            let walk = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil)
            while let file = walk?.nextObject() as? URL {
                guard file.pathExtension == "swift", let text = try? String(contentsOf: file, encoding: .utf8),
                    text.contains(claim)
                else { continue }
                return file.lastPathComponent
            }
        }
        return nil
    }

    static func kebab(_ name: String) -> String {
        var result = ""
        for character in name {
            if character.isUppercase && !result.isEmpty { result += "-" }
            result += character.lowercased()
        }
        return result
    }

    static func sinkSource(target: String, typeName: String) -> String {
        """
        import Foundation
        import GatewayCore

        /// Delivers records to … (say where, and what the destination does with repeats).
        ///
        /// Delivery is at-least-once: a crash re-offers the batch in flight, so write
        /// idempotently by `record_id`.
        public final class \(target): AttributionSink {
            static let batchLimit = 100
            public let maxBatchSize = batchLimit
            let endpoint: String

            public init(endpoint: String) {
                self.endpoint = endpoint
            }

            public func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
                // One outcome per record, in order: .delivered, .retry(reason:after:) for
                // what is worth trying again, .reject(reason:) for what never will be.
                // Throw when the destination is unreachable: the whole batch is retried.
                records.map { _ in .reject(reason: "\(target) is not written yet") }
            }
        }

        /// Registers the sink as `type: \(typeName)`.
        public enum \(target)Plugin: SinkPlugin {
            public struct Options: Sendable {
                public var endpoint: String
            }

            public static let typeName = "\(typeName)"

            /// Reads this sink's keys; keys it does not read are reported as unknown.
            public static func readOptions(_ reader: ConfigReader, context: SinkContext) -> Options? {
                reader.requiredString("endpoint").map(Options.init)
            }

            public static func makeSink(options: Options, context: SinkContext) async throws -> any AttributionSink {
                \(target)(endpoint: options.endpoint)
            }

            /// The batches delivery makes are at most this, which check-config shows.
            public static func maxBatchSize(_ options: Options) -> Int? { \(target).batchLimit }

            /// One line for check-config; never a secret (an endpoint's path or query may
            /// be one, as a Slack webhook's is: the host only).
            public static func summary(_ options: Options) -> String {
                "delivers to \\(URL(string: options.endpoint)?.host ?? "its endpoint")"
            }
        }

        """
    }

    static func testSource(target: String) -> String {
        """
        import Foundation
        import GatewayCore
        import Testing

        @testable import \(target)

        @Suite struct \(target)Tests {
            func record(user: String) -> AttributionRecord {
                var record = AttributionRecord(
                    provider: "iad", kind: .install, dedupeKey: "test:\\(user)", receivedAt: Date(), attributed: true)
                record.appUserID = user
                return record
            }

            @Test func answersOneOutcomePerRecordInOrder() async throws {
                let sink = \(target)(endpoint: "https://example.invalid")
                let outcomes = try await sink.deliver([record(user: "a"), record(user: "b")])
                #expect(outcomes.count == 2)
                // Replace with what the destination must receive, against a local fake of it.
            }
        }

        """
    }
}
