import CShim
import Glibc

/// A condition variable with its own mutex (like NSCondition), timed on CLOCK_MONOTONIC.
///
/// Guards: whatever predicate the caller keeps under `lock()`; the condition itself has no state. Waiters must
/// loop on their predicate (`wait(until:while:)` does it for you): spurious wakeups are allowed by POSIX.
/// The pthread objects are on the heap, created in `init` and destroyed in `deinit`.
public final class SpindleCondition: @unchecked Sendable {
    /// The mutex the waits release and reacquire.
    public let mutex: SpindleMutex
    @usableFromInline let cond: UnsafeMutablePointer<pthread_cond_t>

    /// A condition with a mutex of its own.
    public convenience init() { self.init(sharing: SpindleMutex(.normal)) }

    /// A condition that waits on `mutex`, so several conditions can share one lock.
    public init(sharing mutex: SpindleMutex) {
        self.mutex = mutex
        self.cond = .allocate(capacity: 1)
        checkPthread(cshim_pthread_cond_init_monotonic(self.cond), "pthread_cond_init")
    }

    deinit {
        checkPthread(pthread_cond_destroy(self.cond), "pthread_cond_destroy")
        self.cond.deallocate()
    }

    /// Locks the condition's mutex.
    @inlinable public func lock() { self.mutex.lock() }
    /// Unlocks the condition's mutex.
    @inlinable public func unlock() { self.mutex.unlock() }

    /// Runs `body` with the mutex held.
    @inlinable public func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        try self.mutex.withLock(body)
    }

    /// Waits for a signal. The caller holds the mutex; it is released while waiting and held again on return.
    /// May return spuriously: loop on your predicate.
    @inlinable public func wait() {
        checkPthread(cshim_pthread_cond_wait(self.cond, self.mutex.raw), "pthread_cond_wait")
    }

    /// Waits for a signal or the deadline. The caller holds the mutex. Returns false when the deadline passed
    /// (it returns at once for a past deadline), true otherwise (possibly spuriously).
    public func wait(until deadline: SpindleDeadline) -> Bool {
        if deadline == .distantFuture {
            self.wait()
            return true
        }
        let err = cshim_pthread_cond_timedwait_ns(self.cond, self.mutex.raw, deadline.uptimeNanoseconds)
        if err == ETIMEDOUT { return false }
        checkPthread(err, "pthread_cond_timedwait")
        return true
    }

    /// Waits while `predicate` holds, or until the deadline. The caller holds the mutex. Returns true when the
    /// predicate became false, false when the deadline passed first.
    public func wait(until deadline: SpindleDeadline = .distantFuture, while predicate: () -> Bool) -> Bool {
        while predicate() {
            if !self.wait(until: deadline) { return !predicate() }
        }
        return true
    }

    /// Wakes one waiter, if any. Callable with or without the mutex held.
    @inlinable public func signal() { checkPthread(pthread_cond_signal(self.cond), "pthread_cond_signal") }

    /// Wakes every waiter. Callable with or without the mutex held.
    @inlinable public func broadcast() {
        checkPthread(pthread_cond_broadcast(self.cond), "pthread_cond_broadcast")
    }
}
