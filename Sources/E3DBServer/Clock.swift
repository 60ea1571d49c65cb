import E3DBAPI
import Synchronization

/// Microsecond wall-clock time that never repeats or goes backwards inside a process, so that two back-to-back
/// writes get strictly increasing `created`/`last_modified` stamps (a Python SDK test compares them).
final class MonotonicClock: Sendable {
    private let last = Mutex<Int64>(0)

    /// The current time, at least one microsecond after the previous call's.
    func now() -> Int64 {
        let wall = APITimestamp.nowMicros()
        return last.withLock { value in
            value = max(wall, value + 1)
            return value
        }
    }
}
