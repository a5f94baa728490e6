import CShim
import Glibc
import Synchronization

/// A counting semaphore whose wakeups cannot be stolen: permits signalled while threads are parked go to the
/// parked threads, oldest first, never to a thread that arrives later.
///
/// Guards (all under `condition`'s mutex):
/// - `permits`: free permits, only ever non-zero while nobody is parked (>= 0);
/// - `parked` (from `parkedHead` on): the waiters in line, oldest first, each a small node it owns. `signal` grants
///   the oldest (sets its `granted`, and for a blocking waiter its `grantedAt`) instead of adding a permit when
///   anyone is parked, and advances `parkedHead`; a waiter that times out (or an async one cancelled) ungranted
///   removes its own node, so no permit is lost. The served prefix `parked[..<parkedHead]` is dropped in batches
///   (`compactParkedLocked`, after every advance of the head and every removal): all of it when the line is
///   empty, else once it is longer than `compactAfter` nodes and more than half the array. So the array holds at
///   most `max(compactAfter, live) + live` nodes for `live` waiters in line, and a batch moves fewer nodes than
///   it drops, even when the line never empties (issue 23: it used to grow by one node per wait);
/// - `spinPolicy`: how long a waiter spins before parking, learned from the waits of all threads on this
///   semaphore (see "Spinning" below).
///
/// Outside the mutex: `permitHint` (atomic) mirrors `permits`, written under the mutex, read without it by a
/// spinning waiter.
///
/// Waiters loop on their own predicate (`granted`), so spurious wakeups are harmless; `signal` broadcasts
/// because the granted waiter is a specific one. A node is allocated per wait that blocks (never on the
/// non-blocking path).
///
/// Spinning: a blocking `wait` that finds no permit is idle from then on. If nobody is parked (else the next permit is
/// not its to take) and `spinPolicy.budgetNanos` (read under the lock) is not zero, it unlocks and polls `permitHint`
/// for at most that budget (`SpinPolicy.window`, 16 µs, in `SpinPolicy.spin`), then re-locks and takes a permit if there
/// is one, else parks. A COLD policy (budget 0, the state of a new semaphore and of one signalled every 50 µs or more)
/// parks at once, spending no CPU. Taking a permit after a spin is fair: permits exist only while nobody is parked.
/// The spin does not yield the CPU: yielding paid only after ~10 µs (a thread just started on the spinner's CPU was
/// held off for the whole of a ~100 µs spin), longer than any budget now. What the waiter tells the policy, always
/// under the lock:
/// - `workArrived(afterIdleNanos:)` once per wait that got its permit after going idle: the gap until the re-lock
///   after a spin that found the permit, or until `signal` granted it while parked (`grantedAt`, stamped by the signaller, so the
///   wake's latency is not counted: that is what a spin would have waited);
/// - `spinMissed()` when a spin used its whole budget and the re-lock found no permit (it parks next);
/// - nothing when the wait times out (whether spinning or parked): a timeout only bounds the gap from below,
///   and short timeouts would make it look short; nor when a spin saw a permit that another thread took first.
///
/// Async waiters (`wait() async`, Async/SpindleSemaphore+Async.swift) take their place in the same FIFO with an
/// `isAsync` node: `signal` grants them like the others and resumes their continuation after unlocking instead of
/// broadcasting; a cancelled async waiter removes its own node. They never spin nor report to `spinPolicy`. Their
/// per-node state machine is documented there.
public final class SpindleSemaphore: @unchecked Sendable {
    let condition = SpindleCondition()
    var permits: Int  // protected by condition.mutex
    var parked: [Waiter] = []  // protected by condition.mutex
    var parkedHead = 0  // protected by condition.mutex
    var spinPolicy = SpinPolicy()  // protected by condition.mutex
    /// `permits`, stored under the mutex after every change and read without it by a waiter spinning before it
    /// parks (a hint only; the mutex decides).
    let permitHint = Atomic<Int>(0)
    /// Served nodes that may stay at the front of `parked` before they are dropped in one batch (the line not
    /// being empty). Small enough to bound the array, large enough that the batch copy is rare.
    static let compactAfter = 64

    final class Waiter: @unchecked Sendable {
        var granted = false  // protected by the semaphore's condition.mutex
        /// Blocking waiters only: when `signal` granted the permit (monotonic ns). Protected by the semaphore's
        /// condition.mutex.
        var grantedAt: UInt64 = 0
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
        self.permitHint.store(value, ordering: .relaxed)
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

    /// Takes a permit if one comes before `deadline`; returns whether it got one. On a `SpindleThreadPool`'s thread,
    /// a wait that finds no permit lets the pool start or wake another thread meanwhile.
    public func wait(until deadline: SpindleDeadline) -> Bool {
        // On a pool thread: a permit there now is taken without telling the pool; otherwise the wait may park, and
        // is one the pool sees (the permit count read before the lock is only a hint: another thread may take it).
        if ThreadContext.withCurrent({ $0.poolOf != nil }) {
            if self.takePermitIfFree() { return true }
            return ThreadContext.current.blocking { self.waitForPermit(until: deadline) }
        }
        return self.waitForPermit(until: deadline)
    }

    private func waitForPermit(until deadline: SpindleDeadline) -> Bool {
        self.condition.lock()
        defer { self.condition.unlock() }
        if self.permits > 0 {
            self.takePermitLocked()
            return true
        }
        // Idle from here. (One clock read serves as the deadline check and as the start of the idle gap.)
        let idleSince = cshim_clock_monotonic_ns()
        if deadline.uptimeNanoseconds <= idleSince { return false }
        let budget = self.spinPolicy.budgetNanos
        if budget > 0 && self.parkedHead == self.parked.count {
            self.condition.unlock()
            let end = SpinPolicy.spin(from: idleSince, budget: budget, until: deadline.uptimeNanoseconds) {
                self.permitHint.load(ordering: .relaxed) > 0
            }
            self.condition.lock()
            if self.permits > 0 {
                self.takePermitLocked()
                // Seen by the spin, or signalled between its end and the re-lock: the permit arrived about now.
                self.spinPolicy.workArrived(afterIdleNanos: cshim_clock_monotonic_ns() &- idleSince)
                return true
            }
            if end == .budgetSpent { self.spinPolicy.spinMissed() }
            if deadline.hasPassed { return false }
        }
        let me = Waiter()
        self.parked.append(me)
        while !me.granted {
            if !self.condition.wait(until: deadline) {
                if me.granted { break }  // granted just as we timed out: take it
                self.removeParkedLocked(me)
                return false
            }
        }
        // `signal` stamped `grantedAt` under this mutex after we appended, so after `idleSince`.
        self.spinPolicy.workArrived(afterIdleNanos: me.grantedAt > idleSince ? me.grantedAt - idleSince : 0)
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
            self.compactParkedLocked()
            if waiter.isAsync {
                // Resumed outside the lock; nil if it has not suspended yet (it will see `granted`).
                let continuation = waiter.continuation
                waiter.continuation = nil
                self.condition.unlock()
                continuation?.resume()
                return true
            }
            // The moment the permit arrived, for the waiter's spin policy (only read when a thread is woken).
            waiter.grantedAt = cshim_clock_monotonic_ns()
            self.condition.unlock()
            self.condition.broadcast()
            return true
        }
        self.permits += 1
        self.permitHint.store(self.permits, ordering: .relaxed)
        self.condition.unlock()
        return false
    }

    // MARK: - Under the mutex

    /// Takes a free permit (`permits > 0`). Caller holds `condition`'s mutex.
    @inline(__always)
    func takePermitLocked() {
        self.permits -= 1
        self.permitHint.store(self.permits, ordering: .relaxed)
    }

    /// Removes a waiter that is still in the line (not granted): one that timed out or was cancelled. Caller holds
    /// `condition`'s mutex.
    func removeParkedLocked(_ waiter: Waiter) {
        if let index = self.parked[self.parkedHead...].firstIndex(where: { $0 === waiter }) {
            self.parked.remove(at: index)
            self.compactParkedLocked()
        }
    }

    /// Drops the served prefix `parked[..<parkedHead]`: all of it (keeping the capacity) when nobody is left in
    /// line, else in one batch once it is longer than `compactAfter` and more than half the array. Keeps
    /// `parkedHead <= max(compactAfter, live)` for `live` waiters in line. Caller holds `condition`'s mutex; call
    /// it after every advance of `parkedHead` and every removal from the line.
    @inline(__always)
    func compactParkedLocked() {
        if self.parkedHead == self.parked.count {
            if self.parkedHead > 0 {
                self.parked.removeAll(keepingCapacity: true)
                self.parkedHead = 0
            }
        } else if self.parkedHead > SpindleSemaphore.compactAfter && self.parkedHead * 2 > self.parked.count {
            self.parked.removeFirst(self.parkedHead)
            self.parkedHead = 0
        }
    }

    /// Free permits right now (a snapshot; for tests and diagnostics).
    public var value: Int { self.condition.withLock { self.permits } }
}

extension SpindleSemaphore {
    /// Takes a permit if one is free now; never waits (a pool thread's first look, see `wait(until:)`).
    fileprivate func takePermitIfFree() -> Bool {
        self.condition.lock()
        defer { self.condition.unlock() }
        guard self.permits > 0 else { return false }
        self.takePermitLocked()
        return true
    }
}
