import Synchronization

/// A value that is only reached with its lock held.
///
/// Guards: `value`, by the inline `Synchronization.Mutex` (a futex word: no extra allocation, never moves).
/// Never call user code that could re-enter the same box from inside `withLockedValue`.
public final class SpindleLockedValue<Value: ~Copyable>: Sendable {
    @usableFromInline let storage: Mutex<Value>

    public init(_ value: consuming sending Value) { self.storage = Mutex(value) }

    /// Runs `body` with exclusive access to the value.
    @inlinable @inline(__always)
    public func withLockedValue<R: ~Copyable, E: Error>(_ body: (inout sending Value) throws(E) -> sending R)
        throws(E) -> sending R
    {
        try self.storage.withLock(body)
    }
}

extension SpindleLockedValue where Value: Copyable & Sendable {
    /// A copy of the value, read under the lock.
    public var value: Value { self.storage.withLock { $0 } }
}
