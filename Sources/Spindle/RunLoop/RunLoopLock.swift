/// A value reached only with a pthread mutex held: the lock of every run-loop object.
///
/// Why not `Synchronization.Mutex`: on Linux its lock is a futex word driven from inside the Synchronization
/// library, which ThreadSanitizer does not see, so every access under it is reported as a race. A pthread
/// mutex (`SpindleMutex`) is intercepted by TSan, keeping `--sanitize=thread` runs meaningful.
///
/// Guards: `value`, by `mutex`. The mutex is not recursive (debug builds trap on relocking), so `body` must not
/// take the same lock again, and it must never call user code.
final class RunLoopLock<Value>: @unchecked Sendable {
    private let mutex = SpindleMutex(.normal)
    private var value: Value  // protected by `mutex`

    init(_ value: Value) { self.value = value }

    /// Runs `body` with exclusive access to the value.
    @inline(__always)
    func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        self.mutex.lock()
        defer { self.mutex.unlock() }
        return try body(&self.value)
    }
}
