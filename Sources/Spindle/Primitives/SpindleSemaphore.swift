/// A counting semaphore whose wakeups cannot be stolen: permits signalled while threads are parked go to the
/// parked threads, oldest first, never to a thread that arrives later.
///
/// Guards (all under `condition`'s mutex):
/// - `permits`: free permits, only ever non-zero while nobody is parked (>= 0);
/// - `parked` (from `parkedHead` on): the waiters asleep, oldest first, each a small node it owns. `signal` grants
///   the oldest (sets its `granted`) instead of adding a permit when anyone is parked; a waiter that times out
///   ungranted removes its own node, so memory is bounded by the live waiters and no permit is lost.
///
/// Waiters loop on their own predicate (`granted`), so spurious wakeups are harmless; `signal` broadcasts
/// because the granted waiter is a specific one. A node is allocated per wait that blocks (never on the
/// non-blocking path).
///
/// Async waiters (`wait() async`, Async/SpindleSemaphore+Async.swift) take their place in the same FIFO with an
/// `isAsync` node: `signal` grants them like the others and resumes their continuation after unlocking instead of
/// broadcasting; a cancelled async waiter removes its own node. Their per-node state machine is documented there.
public final class SpindleSemaphore: @unchecked Sendable {
    let condition = SpindleCondition()
    var permits: Int  // protected by condition.mutex
    var parked: [Waiter] = []  // protected by condition.mutex
    var parkedHead = 0  // protected by condition.mutex

    final class Waiter: @unchecked Sendable {
        var granted = false  // protected by the semaphore's condition.mutex
        /// Async waiters only (all protected by the semaphore's condition.mutex): see SpindleSemaphore+Async.
        let isAsync: Bool
        var cancelled = false
        var continuation: UnsafeContinuation<Void, any Error>? = nil

        init(isAsync: Bool = false) { self.isAsync = isAsync }
    }

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
        let me = Waiter()
        self.parked.append(me)
        while !me.granted {
            if !self.condition.wait(until: deadline) {
                if me.granted { break }  // granted just as we timed out: take it
                if let index = self.parked[self.parkedHead...].firstIndex(where: { $0 === me }) {
                    self.parked.remove(at: index)
                }
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
        if self.parkedHead < self.parked.count {
            let waiter = self.parked[self.parkedHead]
            waiter.granted = true
            self.parkedHead += 1
            if self.parkedHead == self.parked.count {
                self.parked.removeAll(keepingCapacity: true)
                self.parkedHead = 0
            }
            if waiter.isAsync {
                // Resumed outside the lock; nil if it has not suspended yet (it will see `granted`).
                let continuation = waiter.continuation
                waiter.continuation = nil
                self.condition.unlock()
                continuation?.resume()
                return true
            }
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
