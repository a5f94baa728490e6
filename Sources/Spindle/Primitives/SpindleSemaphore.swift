/// A counting semaphore whose wakeups cannot be stolen: permits signalled while threads are parked go to the
/// parked threads, oldest first, never to a thread that arrives later.
///
/// Guards (all under `condition`'s mutex):
/// - `permits`: free permits, only ever non-zero while nobody is parked (>= 0);
/// - tickets: a parked waiter takes ticket `nextTicket`; `nextToServe` is the oldest ticket not yet granted, so
///   ticket `t` may leave once `t < nextToServe`. `signal` grants the next ticket instead of adding a permit when
///   any ticket is outstanding;
/// - `abandoned`: tickets whose waiters timed out before being granted; `signal` skips them, so no permit is lost.
///
/// Waiters loop on their own predicate (`ticket < nextToServe`), so spurious wakeups are harmless; `signal`
/// broadcasts because the granted waiter is a specific one.
public final class SpindleSemaphore: @unchecked Sendable {
    private let condition = SpindleCondition()
    private var permits: Int  // protected by condition.mutex
    private var nextTicket: UInt64 = 0  // protected by condition.mutex
    private var nextToServe: UInt64 = 0  // protected by condition.mutex
    private var abandoned: Set<UInt64> = []  // protected by condition.mutex

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
        if deadline.hasPassed { return false }
        let ticket = self.nextTicket
        self.nextTicket += 1
        while ticket >= self.nextToServe {
            if !self.condition.wait(until: deadline) {
                if ticket < self.nextToServe { break }  // granted just as we timed out: take it
                self.abandoned.insert(ticket)
                return false
            }
        }
        return true
    }

    /// Releases a permit: grants it to the oldest parked waiter if there is one (waking it), or keeps it for the
    /// next `wait`. Returns whether a waiter was woken. Callable from any thread.
    @discardableResult
    public func signal() -> Bool {
        self.condition.lock()
        while self.nextToServe < self.nextTicket, self.abandoned.remove(self.nextToServe) != nil {
            self.nextToServe += 1
        }
        if self.nextToServe < self.nextTicket {
            self.nextToServe += 1
            self.condition.unlock()
            self.condition.broadcast()
            return true
        }
        self.permits += 1
        self.condition.unlock()
        return false
    }

    /// Free permits right now (a snapshot; for tests and diagnostics).
    public var value: Int { self.condition.withLock { self.permits } }
}
