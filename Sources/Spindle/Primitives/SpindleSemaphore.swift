/// A counting semaphore whose wakeups cannot be stolen.
///
/// Guards (all under `condition`'s mutex):
/// - `permits`: permits free for anyone, newcomers included (>= 0);
/// - `parked`: waiters asleep that no `signal` has chosen yet;
/// - `handoffs`: permits that `signal` gave to parked waiters. Only a parked waiter may take one, so a thread
///   arriving after the signal cannot steal the wakeup from a waiter that was already asleep (the classic
///   stolen-wakeup case: the first waiter is the one woken).
///
/// Invariant: `handoffs <= number of threads inside wait()`; a timed-out waiter leaves either with a handoff that
/// raced its timeout (success) or by un-parking itself, so no permit is ever lost.
public final class SpindleSemaphore: @unchecked Sendable {
    private let condition = SpindleCondition()
    private var permits: Int  // protected by condition.mutex
    private var parked = 0  // protected by condition.mutex
    private var handoffs = 0  // protected by condition.mutex

    /// Creates a semaphore with `value` free permits. A negative value throws
    /// `SpindleError.negativeSemaphoreValue`.
    public init(value: Int = 0) throws(SpindleError) {
        guard value >= 0 else { throw .negativeSemaphoreValue(value) }
        self.permits = value
    }

    /// Takes a permit, blocking until one is available.
    public func wait() {
        _ = self.wait(until: .distantFuture)
    }

    /// Takes a permit if one comes before `timeout` passes; returns whether it got one. A zero or negative timeout
    /// only polls.
    public func wait(timeout: Duration) -> Bool {
        self.wait(until: .after(timeout))
    }

    /// Takes a permit if one comes before `deadline`; returns whether it got one.
    public func wait(until deadline: SpindleDeadline) -> Bool {
        self.condition.lock()
        defer { self.condition.unlock() }
        if self.permits > 0 {
            self.permits -= 1
            return true
        }
        self.parked += 1
        while self.handoffs == 0 {
            if !self.condition.wait(until: deadline) {
                if self.handoffs > 0 { break }  // a signal chose us just as we timed out: take it
                self.parked -= 1
                return false
            }
        }
        self.handoffs -= 1
        return true
    }

    /// Releases a permit: hands it to a parked waiter if there is one (waking it), or keeps it for the next
    /// `wait`. Returns whether a waiter was woken. Callable from any thread.
    @discardableResult
    public func signal() -> Bool {
        self.condition.lock()
        if self.parked > 0 {
            self.parked -= 1
            self.handoffs += 1
            self.condition.unlock()
            self.condition.signal()
            return true
        }
        self.permits += 1
        self.condition.unlock()
        return false
    }

    /// Free permits right now (a snapshot; for tests and diagnostics).
    public var value: Int { self.condition.withLock { self.permits } }
}
