import CShim

/// One queue worker's own state: created, read and written only by that worker's thread (`QueueCore.workerLoop`),
/// never shared as a value, so it needs no lock. It carries:
/// - `reservation` and `parker`: the worker's reservation (registered in `QueueCore.reservations`) and the futex word
///   it sleeps on (linked into `IdleWorkers`' idle line while parked); both are objects other threads reach under
///   the queue's lock or through their own atomics (see `FastPath/Reservations`, `ThreadParker`);
/// - `pending`: what the worker still has to do after its next unlock (`AfterUnlock`): the waiters and references of
///   operations whose bookkeeping it did, async drain waiters and granted producers, a reference to drop, its
///   unflushed `outstanding` drops (settled every `QueueCore.dropBatch` operations and before it parks), and the
///   finished operations whose references it keeps while it serves the backlog it woke to (`AfterUnlock`,
///   "Retiring"; `woke` turns that keeping back on);
/// - its idle policy, across idle spells.
///
/// Idle spell: starts when the worker first finds nothing to run (`wentIdle`, which stamps the time), and ends
/// when it takes an operation again (`gotWork`, which tells the policy how long the spell lasted). Spins and
/// parks happen inside a spell; a worker woken for work that another worker took first stays in the same spell.
/// States: BUSY (`idleSince == nil`) → IDLE (`wentIdle`; `woke` may note when work arrived) → BUSY (`gotWork`).
struct WorkerState {
    let reservation = Reservation()
    let parker = ThreadParker()
    var pending = AfterUnlock()
    /// When the current idle spell started (monotonic ns); nil while busy.
    private(set) var idleSince: UInt64? = nil
    /// When work last arrived for this worker while it was parked (the waker's signal time), if in this spell.
    private(set) var workArrivedAt: UInt64? = nil
    /// Whether the worker may spin before it parks next: once per idle spell, and once after each wakeup.
    var maySpin = true
    /// How long to spin, learned from this worker's idle spells (see `SpinPolicy`).
    var policy = SpinPolicy()

    /// The worker found nothing to run; starts a spell unless one is already running.
    @inline(__always)
    mutating func wentIdle() {
        if self.idleSince == nil { self.idleSince = cshim_clock_monotonic_ns() }
    }

    /// The worker left a park; `signalTime` is when the queue last decided to wake a parked worker. If that was
    /// during this spell, the work arrived then (the rest was the wake's latency, which a spin would not have
    /// paid); if not (a spurious wakeup, or shutdown), nothing is known yet.
    @inline(__always)
    mutating func woke(workArrivedAt signalTime: UInt64) {
        self.maySpin = true
        self.pending.keepsReferences = true  // what it finds piled up while it slept: a burst (`AfterUnlock`)
        if let since = self.idleSince, signalTime >= since { self.workArrivedAt = signalTime }
    }

    /// The worker took an operation; ends the spell, if any, and reports to the policy how long after going idle
    /// the work arrived (the signal's time if it was woken for it, else now).
    @inline(__always)
    mutating func gotWork() {
        guard let since = self.idleSince else { return }
        let arrived = self.workArrivedAt ?? cshim_clock_monotonic_ns()
        self.idleSince = nil
        self.workArrivedAt = nil
        self.maySpin = true
        self.policy.workArrived(afterIdleNanos: arrived &- since)
    }
}
