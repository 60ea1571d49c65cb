import ArgumentParser
import E3DBCommandLine
import E3DBVectorsCommand

/// `e3dbkit-vectors verify [DIR]`: `e3dbkit vectors verify` (the same command type) as an executable of its own,
/// linking the formats and the vector suites only: the main job (`scripts/run.sh`) builds this, not the whole CLI.
struct E3DBKitVectorsCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "e3dbkit-vectors",
        abstract: VectorsCommand.configuration.abstract,
        discussion: "The same as 'e3dbkit vectors', without the rest of the e3dbkit command line.",
        subcommands: [VerifyVectorsCommand.self]
    )
}

/// The single exit path (``CommandLineMain``), as in `e3dbkit`.
@main
enum VectorsMain {
    static func main() async { await CommandLineMain.run(E3DBKitVectorsCommand.self) }
}
