import CShim
import Glibc
import Synchronization

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
    /// `permits`, stored under the mutex after every change and read without it by a waiter spinning before it
    /// parks (a hint only; the mutex decides).
    let permitHint = Atomic<Int>(0)
    /// Polling rounds a waiter spends before parking (each a few spin-wait hints): 20–40 µs on some CPUs, about
    /// 90 µs where a spin-wait hint costs ~30 ns (the AMD EPYC machine the benchmarks run on). Waking a parked
    /// thread costs tens of microseconds on a virtual machine; a signal from another core usually comes sooner in
    /// a hand-off.
    static let spinRounds = 400
    /// After spinning this long, the waiter yields its CPU every 16 rounds (`sched_yield`, which returns at once
    /// when nothing else wants the CPU). The thread that will signal may be waiting for this very CPU: a thread
    /// just created (a concurrent operation's start) or just woken is often placed on the waker's CPU, and a
    /// spinning waiter would hold it off for the whole spin. Measured: such starts took ~100 µs without the
    /// yield, ~30 µs with it; hand-offs that complete within 10 µs never reach it.
    static let yieldAfterNanos: UInt64 = 10_000

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

    /// Takes a permit if one comes before `deadline`; returns whether it got one.
    public func wait(until deadline: SpindleDeadline) -> Bool {
        self.condition.lock()
        defer { self.condition.unlock() }
        if self.permits > 0 {
            self.permits -= 1
            self.permitHint.store(self.permits, ordering: .relaxed)
            return true
        }
        if deadline.hasPassed { return false }
        // Spin briefly (outside the lock) for a permit before parking. Taking one then is fair: permits exist only
        // while nobody is parked.
        if self.parkedHead == self.parked.count {
            self.condition.unlock()
            var round = 0
            let spinStart = cshim_clock_monotonic_ns()
            while round < SpindleSemaphore.spinRounds && self.permitHint.load(ordering: .relaxed) == 0 {
                if round & 15 == 15 {
                    if deadline != .distantFuture && deadline.hasPassed { break }
                    if cshim_clock_monotonic_ns() &- spinStart >= SpindleSemaphore.yieldAfterNanos { sched_yield() }
                }
                for _ in 0..<8 { cshim_cpu_relax() }
                round += 1
            }
            self.condition.lock()
            if self.permits > 0 {
                self.permits -= 1
                self.permitHint.store(self.permits, ordering: .relaxed)
                return true
            }
            if deadline.hasPassed { return false }
        }
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
        self.permitHint.store(self.permits, ordering: .relaxed)
        self.condition.unlock()
        return false
    }

    /// Free permits right now (a snapshot; for tests and diagnostics).
    public var value: Int { self.condition.withLock { self.permits } }
}
