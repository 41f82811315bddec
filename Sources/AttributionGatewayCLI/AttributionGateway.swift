import ArgumentParser

/// `attribution-gateway`: the server and its offline tools in one executable.
@main
struct AttributionGateway: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attribution-gateway",
        abstract: "A self-hosted mobile attribution server: ingest, normalise, deliver.",
        subcommands: [
            Serve.self, CheckConfig.self, Normalize.self, VerifyPostback.self, Import.self, Replay.self,
            DeadLetters.self, Keywords.self, Report.self, Backup.self, Forget.self,
        ],
        defaultSubcommand: nil)
}
