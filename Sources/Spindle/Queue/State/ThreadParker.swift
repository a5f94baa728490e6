import CShim

/// One worker thread's place to sleep when it has nothing to run: a futex word of its own (`cshim_parker`), so a
/// waker wakes exactly the worker it chose, with one `futex_wake`, and the woken worker returns without retaking a
/// mutex inside a condition wait (glibc marks a mutex retaken that way as contended, which costs its next unlock a
/// `futex_wake` syscall too).
///
/// Ownership: the worker thread creates it and is the only one to `park` on it. `IdleWorkers` keeps parked workers'
/// parkers in its idle line (under `QueueCore.lock`); a wake decision pops one and hands it, retained, to the
/// waker, which `unpark`s it after unlocking. A notification sent before the owner sleeps is kept (one at most),
/// so the unlock-then-unpark order loses nothing.
///
/// Fields: `cell` (the futex word; atomics in C, any thread); `nextParked`, `previousParked`, `inIdleLine`,
/// `signalledAt`, `lastCPU` (under `QueueCore.lock`: the idle line's links, the previous one unowned since the line
/// owns its members through `nextParked` and `IdleWorkers.idleFirst`; whether this parker is in it; when a wake
/// decision popped it; the CPU its owner was on when it joined the line, or -1, for `IdleWorkers`' choice);
/// `nextToWake` (a `WakePlan`'s chain: written under the lock by the decision, read and cleared by the waker
/// before it unparks; nobody else touches it between the pop and the unpark, because a popped worker is not in
/// the idle line again until it has taken that unpark's notification, even after a spurious return: see
/// `QueueCore.parkUnlocking`).
///
/// States, as the queue sees them (all under `QueueCore.lock` except the sleep itself):
/// RUNNING → IN LINE (`IdleWorkers.parking`) → POPPED (a wake decision, or shutdown) → RUNNING (`unparked`, after
/// the owner's `park` returned); IN LINE → RUNNING when the owner comes back without being popped (it saw work
/// before sleeping, or a spurious return through the fault seam).
final class ThreadParker: @unchecked Sendable {
    private let cell: UnsafeMutablePointer<cshim_parker>
    @exclusivity(unchecked) var nextParked: ThreadParker? = nil
    @exclusivity(unchecked) unowned(unsafe) var previousParked: ThreadParker? = nil
    @exclusivity(unchecked) var inIdleLine = false
    @exclusivity(unchecked) var signalledAt: UInt64 = 0
    @exclusivity(unchecked) var nextToWake: ThreadParker? = nil
    @exclusivity(unchecked) var lastCPU: Int32 = -1

    init() {
        self.cell = .allocate(capacity: 1)
        cshim_parker_init(self.cell)
    }

    deinit { self.cell.deallocate() }

    /// Sleeps until unparked (returns at once if a notification is waiting). Returns false on a spurious return
    /// (only through the fault seam), which consumed nothing. The owning thread only, holding no lock.
    @discardableResult
    func park() -> Bool { cshim_parker_park(self.cell) == 0 }

    /// Wakes the owner, or lets its next `park` return at once. Any thread.
    func unpark() { cshim_parker_unpark(self.cell) }
}
