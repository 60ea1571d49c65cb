import E3DBCommandLine
import E3DBKit
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `--progress` of `client file put|get`, on stderr only: the file commands' bar when stderr is a terminal, else
/// one line each time another tenth is done (`download 30% 12.0 MiB / 40.0 MiB`), so logs stay short.
final class ClientFileProgress: Sendable {
    private let label: String
    private let bar: ProgressBar?
    private let lines: Bool
    /// The last tenth reported as a line (-1: none yet).
    private let lastTenth = Mutex(-1)

    /// A reporter; `enabled` false reports nothing.
    init(label: String, enabled: Bool) {
        self.label = label
        let terminal = enabled && isatty(2) == 1
        bar = terminal ? ProgressBar(label: label, quiet: false) : nil
        lines = enabled && !terminal
    }

    /// The callback for the client call, or nil when disabled.
    var callback: (@Sendable (FileProgress) -> Void)? {
        if let bar { return bar.callback }
        guard lines else { return nil }
        return { [self] progress in line(progress) }
    }

    private func line(_ progress: FileProgress) {
        guard let fraction = progress.fractionCompleted, let total = progress.totalBytes else { return }
        let tenth = Int(fraction * 10)
        let due = lastTenth.withLock { last -> Bool in
            guard tenth > last else { return false }
            last = tenth
            return true
        }
        guard due else { return }
        StandardError.line(
            "\(label) \(tenth * 10)% \(ByteSize.text(progress.bytesProcessed)) / \(ByteSize.text(total))")
    }

    /// Ends the bar's line (the lines need nothing).
    func end() { bar?.end() }
}
