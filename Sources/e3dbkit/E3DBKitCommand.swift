import ArgumentParser

@main
struct E3DBKitCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "e3dbkit",
        abstract: "End-to-end encrypted E3DB data: keys, records, documents, notes and files.",
        version: "0.1.0",
        subcommands: [
            FileCommand.self,
            HashCommand.self,
            CanonicalizeCommand.self,
            VectorsCommand.self,
            KeygenCommand.self,
            EAKCommand.self,
            RecordCommand.self,
            SignCommand.self,
            VerifyCommand.self,
            NoteCommand.self,
        ]
    )
}
