import ArgumentParser
import Foundation
import GatewayCore
import GatewayServer
import Logging

struct Forget: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Forget a user in the store and at every sink, or show where a request stands.",
        subcommands: [Request.self, Status.self], defaultSubcommand: Request.self)

    struct Request: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "request",
            abstract: "Forget a user: their records keep no id of theirs, and every sink is asked to delete them.",
            discussion: """
                The request is queued for every sink of config.yaml; a running server's workers carry it out. \
                Prints the request id; `forget status ID` shows each sink's answer.
                """)
        @Option(name: .shortAndLong, help: "The configuration file.")
        var config = "config.yaml"
        @Option(name: .customLong("app-id"), help: "The app the user belongs to.")
        var appID: String
        @Option(name: .customLong("user"), help: "The app's own user id (app_user_id).")
        var appUserID: String?
        @Option(help: "The device's IDFV.")
        var idfv: String?
        @Option(help: "The device's IDFA.")
        var idfa: String?

        func run() async throws {
            let configuration = try loadConfiguration(config, enrichers: false)
            var fields: [String: JSONValue] = ["app_id": .string(appID)]
            fields["app_user_id"] = appUserID.map(JSONValue.string)
            fields["idfv"] = idfv.map(JSONValue.string)
            fields["idfa"] = idfa.map(JSONValue.string)
            let subject: ForgetSubject
            do {
                subject = try ForgetRequests.subject(PayloadFields(fields))
            } catch let error as GatewayError {
                throw ValidationError(error.message)
            }
            let status = try await withExistingStore(configuration) { store in
                try await ForgetRequests(
                    store: store, sinks: { configuration.sinks.map(\.name) }, logger: Logger(label: "forget")
                ).submit(subject)
            }
            print(status.requestID)
            printError(
                "forgot \(status.recordsForgotten) records in the store; queued for \(status.sinks.count) sinks")
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a forget request's status as JSON: each sink pending, done, not_supported or failed.")
        @Option(name: .shortAndLong, help: "The configuration file.")
        var config = "config.yaml"
        @Argument(help: "The request id `forget` printed.")
        var requestID: String

        func run() async throws {
            let configuration = try loadConfiguration(config, enrichers: false)
            let status = try await withExistingStore(configuration) { store in
                try await store.forgetStatus(id: requestID)
            }
            guard let status else {
                printError("no forget request \(requestID)")
                throw ExitCode(1)
            }
            print(String(decoding: status.json.compactUTF8, as: UTF8.self))
        }
    }
}
