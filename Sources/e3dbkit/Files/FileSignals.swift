import E3DBCommandLine
import E3DBKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Signal handling for the commands that write output files (`file encrypt`, `file decrypt`).
///
/// SIGINT, SIGTERM and SIGHUP remove any named, uncommitted temporary output (see `PendingTemporaryFiles`; on
/// Linux outputs are unnamed until commit, so there is usually nothing to remove) and then terminate the process
/// by that signal, as the default action would. SIGQUIT does the same and exits with status 131 instead of dumping
/// core (a core file would hold keys and plaintext) and without the Swift runtime's crash report. Output is never
/// committed after one of these signals. SIGKILL cannot be caught: on Linux nothing is left behind; elsewhere a
/// `.e3dbkit-<hex>.tmp` file can remain beside the output.
enum FileSignals {
    static func install() {
        PendingTemporaryFiles.prepare()
        for signo in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] {
            var action = sigaction()
            #if canImport(Darwin)
                action.__sigaction_u.__sa_handler = handleTerminatingSignal
            #else
                unsafe action.__sigaction_handler.sa_handler = handleTerminatingSignal
            #endif
            unsafe sigemptyset(&action.sa_mask)
            // The default action is back and the signal unblocked while the handler runs, so raise() ends the
            // process by the signal itself.
            action.sa_flags = Int32(truncatingIfNeeded: Int(SA_RESETHAND) | Int(SA_NODEFER))
            _ = unsafe sigaction(signo, &action, nil)
        }
    }
}

/// Async-signal-safe: unlink(2), raise(3) and _exit(2) only.
private func handleTerminatingSignal(_ signo: Int32) {
    PendingTemporaryFiles.removeAll()
    if signo == SIGQUIT { _exit(128 + signo) }
    _ = raise(signo)
    _exit(128 + signo)
}
