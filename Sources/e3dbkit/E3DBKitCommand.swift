import ArgumentParser
import E3DBCommandLine
import E3DBVectorsCommand

struct E3DBKitCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "e3dbkit",
        abstract: "End-to-end encrypted E3DB data: keys, records, documents, notes and files.",
        discussion: """
            Exit codes, the same for every command: 0 success; 1 an I/O or system failure (an output that cannot \
            be written or created, a full disk, a closed pipe); 2 a MAC, signature or checksum did not verify; 64 \
            a usage error; 65 malformed input; 66 an input that cannot be opened or read; 77 a store's or database's passphrase or \
            key is wrong.
            """,
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
            StoreCommand.self,
            SQLiteCommand.self,
            ClientCommand.self,
        ]
    )
}

/// The single exit path of the CLI (``CommandLineMain``): commands throw, and only it turns an error into a
/// message and a code.
@main
enum CLIMain {
    static func main() async { await CommandLineMain.run(E3DBKitCommand.self) }
}
