/// A value that is only reached with its lock held.
///
/// Guards: `value`, by `mutex` (a pthread mutex on the heap, which ThreadSanitizer understands). Never call user
/// code that could re-enter the same box from inside `withLockedValue`.
public final class SpindleLockedValue<Value: ~Copyable> {
    private let mutex = SpindleMutex(.normal)
    private var storage: Value  // protected by mutex

    /// A box holding `value`, reachable only through `withLockedValue`. Any thread; throws nothing.
    public init(_ value: consuming Value) { self.storage = value }

    /// Runs `body` with exclusive access to the value and returns its result.
    public func withLockedValue<R: ~Copyable, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        self.mutex.lock()
        defer { self.mutex.unlock() }
        return try body(&self.storage)
    }
}

/// Shareable across threads only when its value may cross threads.
extension SpindleLockedValue: @unchecked Sendable where Value: ~Copyable & Sendable {}

extension SpindleLockedValue where Value: Copyable {
    /// A copy of the value, read under the lock.
    public var value: Value { self.withLockedValue { $0 } }
}
