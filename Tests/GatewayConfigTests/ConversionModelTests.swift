import Foundation
import GatewayConfig
import GatewayCore
import GatewayProviders
import GatewayServer
import Testing

/// The conversion model file that `providers.skadnetwork.conversion_model` names.
@Suite struct ConversionModelTests {
    static let model = """
        windows:
          - postback: 0
            fine:
              - { values: 0, events: [install, session] }
              - { values: 1-9, events: [trial_started] }
              - { values: 10-63, events: [purchase], revenue: { min: 0.99, max: 49.99 }, currency: USD }
            coarse:
              low: { events: [install] }
              high: { events: [purchase], revenue: { min: 0.99 } }
          - postback: 1
            coarse:
              medium: { events: [retained] }
        """

    /// Loads a config whose model file holds `model`; returns the config or its issues.
    func load(_ model: String) throws -> Result<GatewayConfiguration, ConfigError> {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("model-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try model.write(to: folder.appendingPathComponent("conversion-model.yaml"), atomically: true, encoding: .utf8)
        let config = folder.appendingPathComponent("config.yaml")
        try "providers:\n  skadnetwork: { conversion_model: ./conversion-model.yaml }\n"
            .write(to: config, atomically: true, encoding: .utf8)
        do {
            return .success(try ConfigLoader.load(path: config.path, environment: [:], registry: .builtIn))
        } catch {
            return .failure(error)
        }
    }

    @Test func aModelDecodesFineAndCoarseValuesPerWindow() throws {
        let config = try load(Self.model).get()
        let provider = try #require(try config.providers.first?.build() as? SKAdNetworkProvider)
        let model = try #require(provider.options.conversionModel)
        #expect(model.outcome(window: 0, fine: 12, coarse: nil)?.events == ["purchase"])
        #expect(model.outcome(window: 0, fine: 12, coarse: nil)?.revenueMax == Decimal(string: "49.99"))
        #expect(model.outcome(window: 0, fine: nil, coarse: "high")?.revenueMin == Decimal(string: "0.99"))
        #expect(model.outcome(window: 1, fine: nil, coarse: "medium")?.events == ["retained"])
        #expect(model.outcome(window: 2, fine: nil, coarse: "low") == nil)

        var record = AttributionRecord(provider: "skadnetwork", kind: .postback, dedupeKey: "k", receivedAt: Date())
        record.fineValue = 3
        model.decode(&record)
        #expect(record.events == ["trial_started"] && record.revenueMin == nil)

        // The next value for an app's state, as the conversion-value route asks.
        #expect(model.fineValue(event: "__SESSION__", revenue: [:]) == 0)
        #expect(model.fineValue(event: "purchase", revenue: ["USD": 4.99]) == 10)
        #expect(model.fineValue(event: "purchase", revenue: ["EUR": 4.99]) == nil)
        // Past the top range's max is the best payer, not no payer.
        #expect(model.fineValue(event: "purchase", revenue: ["USD": 250]) == 10)
        #expect(model.coarseValue(window: 0, event: "purchase", revenue: ["USD": 250]) == "high")
        #expect(model.coarseValue(window: 0, event: "purchase", revenue: [:]) == nil)
        #expect(model.coarseValue(window: 1, event: "retained", revenue: [:]) == "medium")
    }

    /// Only the top range is open upward: a purchase between two ranges' bounds, or
    /// past a lower range's max when a higher one exists, is not stretched to fit.
    @Test func onlyTheHighestRevenueRangeTakesAmountsPastItsMax() throws {
        let config = try load(
            """
            windows:
              - postback: 0
                fine:
                  - { values: 0, events: [session] }
                  - { values: 1-9, events: [purchase], revenue: { min: 0.99, max: 9.99 }, currency: USD }
                  - { values: 10-63, events: [purchase], revenue: { min: 20, max: 49.99 }, currency: USD }
            """
        ).get()
        let provider = try #require(try config.providers.first?.build() as? SKAdNetworkProvider)
        let model = try #require(provider.options.conversionModel)
        #expect(model.fineValue(event: "purchase", revenue: ["USD": 5]) == 1)
        #expect(model.fineValue(event: "purchase", revenue: ["USD": 15]) == nil)
        #expect(model.fineValue(event: "purchase", revenue: ["USD": 1000]) == 10)
    }

    /// Amounts, ranges and currencies written almost right were read as something else
    /// (`1,5` as 1, `.nan` as 0, `-1` as 1) without a word.
    @Test func amountsRangesAndCurrenciesAreReadExactlyOrRefused() throws {
        for (line, message) in [
            ("{ values: 0-63, events: [purchase], revenue: { min: \"1,5\" } }", "found '1,5'"),
            ("{ values: 0-63, events: [purchase], revenue: { min: 1.5abc } }", "found '1.5abc'"),
            ("{ values: 0-63, events: [purchase], revenue: { min: .nan } }", "found '.nan'"),
            ("{ values: 0-63, events: [purchase], revenue: { min: 1. } }", "found '1.'"),
            ("{ values: \"-1\", events: [purchase] }", "found '-1'"),
            ("{ values: \"1-\", events: [purchase] }", "found '1-'"),
            ("{ values: 0-63, events: [purchase], currency: US Dollars }", "found 'US Dollars'"),
        ] {
            let model = "windows:\n  - postback: 0\n    fine:\n      - \(line)\n"
            guard case .failure(let error) = try load(model) else {
                Issue.record("accepted: \(line)")
                continue
            }
            #expect(error.issues.contains { $0.message.contains(message) }, "\(error.issues.map(\.description))")
        }
        let good =
            "windows:\n  - postback: 0\n    fine:\n      - { values: 0-63, events: [p], revenue: { min: 0, max: 10.5 }, currency: EUR }\n"
        #expect(throws: Never.self) { try load(good).get() }
    }

    @Test func overlapsGapsAndOutOfRangeValuesAreErrorsInTheModelFile() throws {
        let bad = """
            windows:
              - postback: 0
                fine:
                  - { values: 0-5, events: [install] }
                  - { values: 5-9, events: [trial] }
                  - { values: 12-70, events: [purchase] }
                  - { values: 20-30, events: [purchase], revenue: { min: 9, max: 1 } }
                coarse:
                  huge: { events: [x] }
              - postback: 3
            """
        guard case .failure(let error) = try load(bad) else {
            Issue.record("a bad model was accepted")
            return
        }
        let messages = error.issues.map(\.description)
        #expect(error.issues.allSatisfy { $0.file.hasSuffix("conversion-model.yaml") })
        #expect(messages.contains { $0.contains(":5:") && $0.contains("value 5 is also in fine[0]") })
        #expect(messages.contains { $0.contains("fine values run from 0 to 63, found '12-70'") })
        #expect(messages.contains { $0.contains("min must not be above max") })
        #expect(messages.contains { $0.contains("fine value 10 is in no range") }, "\(messages)")
        #expect(messages.contains { $0.contains("windows[0].coarse.huge") && $0.contains("unknown key") })
        #expect(messages.contains { $0.contains("windows[1].postback") && $0.contains("between 0 and 2") })
    }

    /// Named at the key that names it, with the key's line, as every other config error is.
    @Test func aMissingModelFileIsAConfigError() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("nomodel-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let config = folder.appendingPathComponent("config.yaml")
        try "providers:\n  skadnetwork: { conversion_model: ./nowhere.yaml }\n".write(
            to: config, atomically: true, encoding: .utf8)
        #expect { try ConfigLoader.load(path: config.path, environment: [:], registry: .builtIn) } throws: { error in
            (error as? ConfigError)?.issues.contains {
                $0.path == "providers.skadnetwork.conversion_model" && $0.line == 2
                    && $0.message.contains("nowhere.yaml")
            } == true
        }
    }
}
