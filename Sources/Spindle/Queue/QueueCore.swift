import Synchronization

/// The engine behind a `SpindleOperationQueue`: its operations, ready buckets, slots and pool of worker threads.
/// The public handle owns it; workers hold it too, so it outlives the handle until the workers have exited.
///
/// Guards: every `var` below is protected by `lock` (the mutex `drained` waits with; parked workers sleep on their own `ThreadParker`s), except
/// `handle` (set once in `init`; valid while `outstanding > 0`, since the core then retains it, and while anyone
/// calls into the handle), `outstanding` (atomic),
/// `pushes` (atomic, a hint for spinning workers), `idleHints` (the adding thread's view of `idle`; see
/// `FastPath/IdleHints`), `boundedHint` (atomic mirror of `capacity != nil`, read without the lock by `addOperation`)
/// and `hookSlot` (see `FastPath/QueueHookSlot`). Bounded queues, blocked producers and the statistics behind
/// `snapshot()`: see `QueueCore+Backpressure`. The vars are `@exclusivity(unchecked)`: the lock, not the
/// runtime's dynamic exclusivity checks, makes access exclusive (those checks cost more than the lock here).
/// Operations' queue links (`bucket*`, `member*`) and `placement` are protected by this lock too.
/// Lock order: `DependencyGraph.lock` → `lock` → an operation's `locked`. User code never runs under `lock`.
///
/// Scheduling, O(1) per event, no rescans:
/// - an operation that is not ready costs nothing until its readiness count reaches zero (or it is cancelled);
///   then it claims its `scheduled` bit and `scheduleReady` pushes it into `ready`;
/// - a worker takes the highest-priority ready operation when `running < limit` and not suspended, and with a
///   long backlog reserves the next few for the same slot (`FastPath/Reservations`);
/// - each event that makes one operation runnable wakes one parked worker, or spawns a thread if none is idle
///   and fewer than `limit` exist (`wakeOrSpawnLocked`, deciding through `IdleWorkers`).
///
/// Barriers: operations added while a barrier is pending are `held` (FIFO, with the barriers among them). The
/// first held barrier is released when every operation before it has finished; the operations behind it are
/// released when it finishes (`BarrierGate`).
///
/// References: the queue holds exactly one retained reference to each operation from the moment it is added (the
/// inbox push, or admission under the lock) until it has finished and been unlinked, and moves that one reference
/// around instead of retaining and releasing on each step (links are unmanaged). Who owns it follows from the
/// operation's `placement` (see `QueuePlacement`): the member list from admission until a worker takes or reserves
/// it, then that worker (a reservation taken back into the buckets gives it back to the list). A worker whose
/// operation finished on its thread unlinks it and drops the reference after unlocking. One whose operation is
/// still running when `start()` returns (a concurrent operation) hands the reference back to the list
/// (`handBackLocked`) if the operation is still a member, or drops it if it was unlinked meanwhile; the finish
/// path's `operationDidFinish` drops it when the list owns it. All under `lock`; no reference is ever dropped
/// under it.
///
/// Lifecycle (`QueueLifecycle`, events in `QueueCore+Lifecycle`): `running` → `draining` or `cancelling` (an
/// explicit shutdown: the inbox is closed, adds are refused, blocked producers are refused) → `stopping` (no members
/// left, or the handle was released, which happens only with nothing outstanding) → `terminated` (every worker out
/// of its loop); the threads are joined by the first termination wait that sees it, or by the handle's release (a
/// worker that performs the release itself is detached instead, as it is about to exit). Forward only.
final class QueueCore: @unchecked Sendable {
    let lock = SpindleMutex(.adaptive)  // short sections, taken by the adding thread and every worker
    let drained: SpindleCondition
    @exclusivity(unchecked) unowned(unsafe) var handle: SpindleOperationQueue?

    @exclusivity(unchecked) var name: String
    @exclusivity(unchecked) var ready = ReadyBuckets()
    /// Every operation added and not yet through, in order (see `MemberList`).
    @exclusivity(unchecked) var members = MemberList()
    /// Width, slots in use, suspension (see `DispatchSlots`).
    @exclusivity(unchecked) var slots: DispatchSlots
    /// The workers and the wake decision (see `IdleWorkers`); mirrored for adding threads in `idleHints`.
    @exclusivity(unchecked) var idle: IdleWorkers
    /// Running or shutting down (see `QueueLifecycle`).
    @exclusivity(unchecked) var lifecycle = QueueLifecycle()
    /// `lifecycle.isShuttingDown`: workers must exit (the queue is stopping). Caller holds `lock`.
    @inline(__always)
    var shuttingDown: Bool { self.lifecycle.isShuttingDown }
    /// Which members are released and which are held behind a barrier (see `BarrierGate`).
    @exclusivity(unchecked) var barriers = BarrierGate<Unmanaged<SpindleOperation>>()
    /// The barrier admitted last, unretained: alive whenever an operation is held (barriers finish in order, so the
    /// last one is pending while anything is held), which is the only time it is read (`admitLocked`).
    @exclusivity(unchecked) var latestBarrier: Unmanaged<SpindleOperation>? = nil
    /// The counters behind `snapshot()` (see `QueueStatistics`).
    @exclusivity(unchecked) var stats = QueueStatistics()
    /// For a queue served by a run loop (the main queue) instead of a pool: that loop (its pending perform is
    /// counted in `idle`).
    let servingRunLoop: SpindleRunLoop?
    /// For a queue served by a shared thread pool instead of threads of its own: that pool, retained (it outlives
    /// every queue on it). Its requests are counted in `idle` (see `QueueCore+Pool`).
    let pool: SpindleThreadPool?
    /// Pushes into `ready` while a worker spins (see `FastPath/IdleHints`, `PushCounter`).
    let pushes = PushCounter()
    /// Workers' reservations (see `FastPath/Reservations`), and how many may hold operations. Under `lock`.
    @exclusivity(unchecked) var reservations: [Reservation] = []
    @exclusivity(unchecked) var reservationHolders = 0
    @exclusivity(unchecked) var reservedTotal = 0  // operations ever reserved (diagnostics and tests)
    /// Batch waits under way, by the slot they hold (`QueueCore+BatchWait`): waiter threads per slot-holding member
    /// (negative once that member finished and its slot was freed).
    @exclusivity(unchecked) var batchWaitsBySlot: [UInt: Int] = [:]
    /// `reservedFloor` (below), as seen under the lock: what workers pushing into the buckets compare with.
    @exclusivity(unchecked) var floorLocked = QueueCore.noFloor
    /// Async drain waiters (`waitUntilAllOperationsAreFinished() async`), each signalled once when the queue
    /// drains (see `DrainWaiters`). Under `lock`.
    @exclusivity(unchecked) var asyncDrainWaiters = DrainWaiters()
    /// Async termination waiters (`awaitTermination() async`), each signalled once when the queue terminates.
    /// Under `lock`.
    @exclusivity(unchecked) var terminationWaiters = DrainWaiters()

    /// Capacity, full-queue policy and blocked producers (see `Admission`, `QueueCore+Backpressure`); mirrored
    /// for adding threads in `boundedHint`. Under `lock`.
    @exclusivity(unchecked) var admission = Admission()

    // MARK: What an adding thread touches
    // Padded off from the fields above, which workers write for every operation (buckets, counts, `pushes`): an
    // adding thread reads and writes only this cluster of the core, and workers write it only once per batch or
    // state change, so their per-operation writes do not take its cache line away from the adding thread.
    private let padBefore: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    /// Operations added without the lock (`addOperation`'s fast path; see `FastPath/Inbox`). Whoever takes `lock`
    /// admits them first (`drainInboxLocked`), so every locked view of the queue includes them, in order.
    let inbox = Inbox()
    /// Operations claimed and not yet through (see `FastPath/Outstanding`); while above zero the queue retains its
    /// handle. Incremented by adding threads, decremented by finishing paths (workers in batches).
    let outstanding = OutstandingCount()
    /// Lock-free summary of `idle` ("a worker spins", "a worker is parked", "a thread may be started") for the
    /// fast path's wake decision. Published under `lock` by `publishIdleLocked`, read without it.
    let idleHints = IdleHints()
    /// `capacity != nil`, for `addOperation`'s one test before its lock-free path (see `BoundedHint`).
    let boundedHint = BoundedHint()
    /// The `fork()` generation this queue was made in (see `ForkGeneration`): in a forked child it differs, and the
    /// queue refuses work (`SpindleOperationQueue+Fork`). Set in `init`; changed only by `SpindleFaults`' fork
    /// simulation, by the test that owns the queue, before and after using it.
    @exclusivity(unchecked) var forkGeneration = ForkGeneration.current
    /// At most the lowest bucket level of any reserved operation (`FastPath/Reservations`); `noFloor` when none has
    /// been reserved since the queue last had no members. Written under `lock` (with `floorLocked`), read by
    /// adding threads.
    let reservedFloor = Atomic<Int>(QueueCore.noFloor)
    private let padAfter: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    /// Bumped when reserved operations must give way (see `FastPath/Reservations`). Atomic; read by a worker before
    /// each reserved operation it claims, written rarely, so it has a cache line to itself.
    let batchEpoch = Atomic<Int>(0)
    private let padEpoch: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0)

    init(name: String, limit: Int, servingRunLoop: SpindleRunLoop? = nil, pool: SpindleThreadPool? = nil) {
        precondition(servingRunLoop == nil || pool == nil, "QueueCore: served by a run loop and a pool at once")
        self.servingRunLoop = servingRunLoop
        self.pool = pool
        self.name = name
        self.slots = DispatchSlots(requested: limit, resolved: QueueCore.resolve(limit))
        self.idle = IdleWorkers(server: servingRunLoop != nil ? .runLoop : pool != nil ? .pool : .ownThreads)
        self.drained = SpindleCondition(sharing: self.lock)
    }

    /// Served by a run loop or a pool (no threads of its own): adds take the lock (`admitOne`), since the inbox's
    /// wake hints describe threads of its own.
    @inline(__always)
    var isServed: Bool { self.servingRunLoop != nil || self.pool != nil }

    static func resolve(_ requested: Int) -> Int {
        requested == SpindleOperationQueue.defaultMaxConcurrentOperationCount ? spindleActiveProcessorCount() : requested
    }

    // MARK: - The inbox (adding without the lock)

    /// Takes `lock` and admits everything in the inbox: the way in for any code that reads or changes the queue.
    @inline(__always)
    func lockAndAdmit() {
        self.lock.lock()
        self.drainInboxLocked()
    }

    /// `lockAndAdmit`, `body`, unlock.
    @inline(__always)
    func withAdmittedLock<R>(_ body: () throws -> R) rethrows -> R {
        self.lockAndAdmit()
        defer { self.lock.unlock() }
        return try body()
    }

    /// Pushes a claimed operation on the inbox (retaining it: the queue's reference). Lock-free. Returns false,
    /// having pushed nothing, if the queue was shut down (the inbox is closed): the caller gives the operation back.
    @inline(__always)
    func pushToInbox(_ op: SpindleOperation) -> Bool { self.inbox.push(op) }

    /// After a push: whether someone must be woken or a thread started (see `IdleHints`).
    @inline(__always)
    func needsWakeAfterInboxPush() -> Bool { self.idleHints.needsWakeAfterPush() }

    /// Admits the inbox's operations in the order they were added. Caller holds `lock`.
    @inline(__always)
    func drainInboxLocked() {
        assert(self.checkInvariantsLocked(), "QueueCore: the locked state's invariants are broken")
        if self.inbox.isEmpty { return }
        self.drainInboxSlowLocked()
    }

    @inline(never)
    private func drainInboxSlowLocked() {
        self.admitInboxChainLocked(self.inbox.takeAllOldestFirst())
    }

    /// Admits a chain taken from the inbox (oldest first, each with the queue's reference). Caller holds `lock`.
    func admitInboxChainLocked(_ chain: Unmanaged<SpindleOperation>?) {
        var oldestFirst = chain
        while let link = oldestFirst {
            oldestFirst = link._withUnsafeGuaranteedRef { op in
                let next = op.nextLink
                op.nextLink = nil
                return next
            }
            self.admitLocked(link)  // the inbox's reference becomes the member list's
            self.scheduleAdmittedLocked(link)
        }
        self.noteMembersLocked()
    }

    /// Publishes `idle`'s summary for adding threads after `idle` or `limit` changed. Caller holds `lock`.
    @inline(__always)
    func publishIdleLocked() {
        assert(self.idle.check(), "QueueCore: IdleWorkers invariants broken")
        self.idleHints.publish(self.idle.hintWord(limit: self.slots.limit))
    }

    // MARK: - Outstanding operations and the handle

    /// One more claimed operation; the first one retains the handle. The caller holds the handle (it is adding to
    /// it), so the handle cannot be going away meanwhile.
    @inline(__always)
    func addOutstanding() {
        if self.outstanding.add() {
            _ = Unmanaged.passUnretained(self.handle!).retain()
        }
    }

    /// `n` operations are through; the last one releases the handle, which may free it (and shut this core down
    /// from the calling thread). Never under `lock`.
    @inline(__always)
    func dropOutstanding(_ n: Int) {
        if self.outstanding.drop(n) {
            Unmanaged.passUnretained(self.handle!).release()
        }
    }

    // MARK: - Admission (under lock)

    /// Links a claimed operation as a member, released or held behind a barrier; `link` carries the queue's
    /// reference (see "References"), which the member list now owns. Caller holds `lock`.
    @inline(__always)
    func admitLocked(_ link: Unmanaged<SpindleOperation>) {
        let isBarrier = link._withUnsafeGuaranteedRef { op -> Bool in
            if self.stats.collectsWaitTimes { self.stampAdmissionLocked(op) }
            return op.isBarrier
        }
        self.members.append(link, isBarrier: isBarrier)
        let released = self.barriers.admit(link, isBarrier: isBarrier)
        link._withUnsafeGuaranteedRef { $0.placement.move(to: released ? .pending : .held) }
        if !released {
            if isBarrier {
                self.latestBarrier = link
            } else if let barrier = self.latestBarrier {
                // A gated operation remembers the barrier it waits behind (see `SpindleOperation+Conditions`).
                link._withUnsafeGuaranteedRef { $0.noteHeldBehind(barrier) }
            }
            self.releaseHeldLocked()
        }
    }

    /// Releases what the barrier gate lets go now (held operations up to the next barrier, and that barrier once
    /// nothing before it is unfinished), scheduling those already claimed as ready. Caller holds `lock`.
    func releaseHeldLocked() {
        while let (link, _) = self.barriers.nextReleasable() {
            let scheduled = link._withUnsafeGuaranteedRef { op -> Bool in
                op.placement.move(to: .pending)
                return op.currentState.isScheduled
            }
            if scheduled { self.pushLocked(link) }
        }
    }

    /// Puts a scheduled operation in its bucket unless it is held behind a barrier, already in one, not (or no
    /// longer) a member, or already taken by a worker: safe to call for a stale request. Caller holds `lock`.
    func pushLocked(_ link: Unmanaged<SpindleOperation>, announce: Bool = true) {
        let level = link._withUnsafeGuaranteedRef { op -> Int in
            guard op.placement == .pending, op.currentState.lifecycle == .enqueued else { return -1 }
            op.placement.move(to: .ready)
            return op.isBarrier ? ReadyBuckets.barrierLevel : op.queuePriority.bucket
        }
        guard level >= 0 else { return }
        self.ready.push(link, level: level)
        if announce && self.idle.spinning { self.pushes.announce() }  // tells the spinner to look
        self.noteReadyLocked(level: level)
    }

    /// Right after admission: push it if someone already claimed its scheduled bit (a cancel or a finishing
    /// dependency racing the add, whose own request was ignored while it was not yet a member), else claim it if
    /// ready. Caller holds `lock`.
    func scheduleAdmittedLocked(_ link: Unmanaged<SpindleOperation>) {
        let claimed = link._withUnsafeGuaranteedRef { op -> Bool in
            if op.currentState.isScheduled { return true }
            return op.advanceState { $0.scheduling() }.moved
        }
        if claimed { self.pushLocked(link) }
    }

    // MARK: - The finish bookkeeping

    /// The queue's side of a member's finish: unlink it, free its slot, release operations held behind it, and
    /// wake queue waiters if it was the last (and stop the workers if the queue was shut down); admit blocked
    /// producers' operations that now fit. Caller holds `lock`; the caller decides who runs next. What is left for
    /// after unlocking goes into `after`: semaphores (async drain waiters, granted producers, whose tasks may add
    /// work to this queue) and, when this finish stopped a shut-down queue, the wake of every parked worker.
    /// Returns whether the member list owned the queue's reference to `op` (`dropsReference`), which the caller
    /// must release after unlocking.
    ///
    /// `freesSlot`: false for an operation a worker ran from its reserved batch, which never took a slot of its own.
    func unlinkFinishedLocked(_ op: SpindleOperation, freesSlot: Bool = true, into after: inout AfterUnlock) -> Bool {
        self.members.unlink(op, isBarrier: op.isBarrier)
        let dropsReference = op.placement.listOwnsReference
        op.placement.move(to: .outside)
        if freesSlot { self.slots.free() }
        if freesSlot && !self.batchWaitsBySlot.isEmpty { self.batchWaitSlotFreedLocked(op) }
        let s = op.currentState
        self.stats.recordFinish(cancelled: s.isCancelled, failed: s.isFailed)
        self.barriers.finished(isBarrier: op.isBarrier)
        if self.barriers.mayRelease { self.releaseHeldLocked() }
        if self.admission.hasProducers { after.addSemaphores(self.grantProducersLocked()) }  // room for producers
        if self.members.count == 0 {
            // Nothing is reserved now: newly ready operations need not check reservations until one is made.
            if self.floorLocked != QueueCore.noFloor { self.setFloorLocked(QueueCore.noFloor) }
            self.drained.broadcast()
            if !self.asyncDrainWaiters.isEmpty { after.addSemaphores(self.asyncDrainWaiters.takeAll()) }
            if self.lifecycle.isShutDown { self.stopIfEmptyLocked(&after) }  // a shut-down queue's last member
        }
        return dropsReference
    }

    // MARK: - Hooks
    // Declared last, after the methods, so that adding it moved no line the SPIN models pin (Models/).

    /// The queue's hooks (`SpindleOperationQueue.hooks`), read without `lock` on every add, start and finish (see
    /// `FastPath/QueueHookSlot`: its own leaf lock and atomic; `SpindleOperationQueue+Hooks`).
    let hookSlot = QueueHookSlot()
}
