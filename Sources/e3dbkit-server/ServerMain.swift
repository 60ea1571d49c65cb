import E3DBCommandLine

/// The single exit path of `e3dbkit-server` (``CommandLineMain``, shared with `e3dbkit`).
@main
enum ServerMain {
    static func main() async { await CommandLineMain.run(ServerCommand.self) }
}
