import CShim

/// The worker side of `QueueCore`: deciding whom to wake, the workers' loop, and the run-loop-served variant.
///
/// A worker is in one of three states (all transitions under `lock`, counted in `idle`; see `IdleWorkers`):
/// - BUSY: it took an operation (`running += 1`) and runs it outside the lock, then the operations it reserved
///   with it, if any (see `FastPath/Reservations`), in the same slot;
/// - SPINNING (`idle.spinning`, at most one worker, and only in a queue of width 1: see
///   `IdleWorkers.spinningAllowed`): it found nothing to run and its `SpinPolicy` expects work
///   within the spin window, so it polls `pushes` and the inbox without the lock for up to that window (16 µs),
///   which saves a park and a wake when work comes that soon. While a worker spins, events wake nobody: the
///   spinner takes the work and wakes the next worker itself if more is ready. It always looks again under the
///   lock before parking, so no push is missed. At light load the policy is COLD and workers park at once;
/// - PARKED (`idle.parked`): asleep on its own `ThreadParker`, in `idle`'s idle line until a wake decision takes
///   it (first parked, first woken); `idle.wakeupsInFlight` counts the ones taken and not yet back. While one is
///   on its way, an event's operation wakes nobody else either: the woken worker takes an operation and, in the
///   same locked step, wakes the next one if more is ready (`IdleWorkers.wakeOrSpawn`, the hand-off rule). So a
///   burst's wakes are chained by the workers, one at a time, not all sent by the adding thread.
/// A worker with nothing runnable first takes back other workers' unclaimed reservations, if a slot is free.
/// BUSY → SPINNING (width 1, nothing runnable, the policy says spin, nobody else spins, and it did not spin yet in
/// this idle spell or since its last wakeup) → BUSY (work arrived) or PARKED (window spent, still nothing) → BUSY
/// (signalled) … → exit when `shuttingDown` (the queue is stopping), counted out by `workerExited`. Each worker's
/// own `WorkerState` times its idle spells for its policy.
///
/// Finishing on a worker: a synchronous operation that finishes on the worker running it defers its queue
/// bookkeeping (`ThreadContext.deferrable`) to the worker, which does it under the same lock acquisition that
/// takes the next operation, then releases the finished operation's waiters before running the next one. One
/// lock round trip per operation instead of two (per batch, with reservations); the order (bookkeeping, then
/// waiters) is unchanged.
extension QueueCore {
    /// A worker drops finished operations from `outstanding` in batches of this many (and before it parks), so
    /// the adding thread keeps that counter's cache line to itself.
    static let dropBatch = 256

    var canDispatchLocked: Bool { self.slots.canDispatch(ready: self.ready.count) }

    /// The worker's life (see the states above). "Do not rename": profilers match on it.
    ///
    /// References to operations are dropped outside the lock: releasing one may free user objects (and even this
    /// queue's handle), which must never happen under our lock. The operation being run is held through the
    /// queue's own reference, handed over by `takeNextLocked` (see `QueueCore`, "References"). What the worker
    /// still has to do after unlocking waits in `worker.pending` (see `WorkerState`).
    func workerLoop() {
        let context = ThreadContext.current
        context.workerOf = self
        var worker = WorkerState()
        self.lock.lock()
        self.reservations.append(worker.reservation)
        while !self.shuttingDown {
            self.drainInboxLocked()
            if self.canDispatchLocked {
                self.runNextUnlocking(&worker, context)  // BUSY; back under the lock after
                continue
            }
            if self.slots.hasFreeSlot && self.reclaimReservationsLocked() {
                continue  // another worker's reserved operations are back in the buckets: run them
            }
            if !worker.pending.hasNoReleases {
                self.lock.unlock()
                self.perform(&worker.pending, keepingDropsBelow: .max)
                self.lock.lock()
                continue
            }
            worker.wentIdle()
            if IdleWorkers.spinningAllowed(width: self.slots.limit) && worker.maySpin && worker.policy.budgetNanos > 0
                && self.idle.beginSpin()
            {
                self.spinUnlocking(&worker)  // SPINNING; back under the lock after
                continue  // look again under the lock before parking
            }
            if worker.pending.outstandingDrops > 0 {
                // About to park: settle the count first (this may release the handle and shut the queue down from
                // here, which `shutdown` handles; the loop then sees `shuttingDown`).
                self.lock.unlock()
                self.perform(&worker.pending)
                self.lock.lock()
                continue
            }
            self.parkUnlocking(&worker)  // PARKED; back under the lock after
        }
        self.reservations.removeAll { $0 === worker.reservation }
        self.lock.unlock()
        self.perform(&worker.pending)
        context.workerOf = nil
        self.perform(self.workerExited())  // the last one out terminates the queue
    }

    /// BUSY: takes the best ready operation, decides whom to wake if more can start, and reserves the next few
    /// unless it woke someone (caller holds `lock`, which this releases); wakes that worker, does the previous
    /// batch's releases, runs the operation and the reserved ones, and retakes the lock to do their bookkeeping (left
    /// in `worker.pending` for after the next unlock: their waiters, references and `outstanding` drops).
    @inline(__always)
    private func runNextUnlocking(_ worker: inout WorkerState, _ context: ThreadContext) {
        let op = self.takeNextLocked()  // 1. the queue's reference is ours now
        let cancelling = self.lifecycle.state == .cancelling  // after shutdown(.cancel) nothing starts uncancelled
        let wake = self.wakeOrSpawnLocked()  // 2. whom to wake for what is left
        if !cancelling { self.reserveLocked(worker.reservation, behind: op, afterWaking: wake) }  // 3. the next few, maybe
        worker.pending.wake.add(wake)
        self.lock.unlock()
        worker.gotWork()
        // The previous batch's waiters; its references and drops later (`AfterUnlock`, "Retiring"; `op` outstanding).
        self.perform(&worker.pending, keepingDropsBelow: QueueCore.dropBatch, retiring: true)
        if cancelling { op._withUnsafeGuaranteedRef { $0.cancel() } }  // the shutdown's own cancel may not be there yet
        context.queue = self.handle
        let lateSeen = QueueCore.lateWaitersBefore(worker.reservation)  // see `claimReserved`
        let deferredFinish = self.runOnWorker(op, context)
        var ranHead: Unmanaged<SpindleOperation>? = nil  // the reserved operations run, in order (`nextLink`)
        var ranTail: Unmanaged<SpindleOperation>? = nil
        var justRan = deferredFinish ? op : nil
        while let next = self.claimReserved(worker.reservation, unlessWaitedOn: justRan, lateSince: lateSeen) {
            if ranHead == nil && deferredFinish { context.batchTaken = op }  // see `ThreadContext.batchTaken`
            let done = self.runOnWorker(next, context)
            precondition(done, "QueueCore: a reserved block operation did not finish on its worker")
            if let tail = ranTail {
                tail._withUnsafeGuaranteedRef { $0.nextLink = next }
            } else {
                ranHead = next
                context.batchRan = next
            }
            ranTail = next
            justRan = next
        }
        if ranHead != nil { context.endBatch() }
        context.queue = nil
        self.lock.lock()
        self.settleReservationLocked(worker.reservation)
        self.settleRunLocked(op, finishedHere: deferredFinish, into: &worker.pending)
        var node = ranHead
        while let link = node {
            link._withUnsafeGuaranteedRef { x in
                node = x.nextLink
                _ = self.unlinkFinishedLocked(x, freesSlot: false, into: &worker.pending)
            }
            worker.pending.addFinished(link)
            worker.pending.outstandingDrops += 1
        }
    }

    /// SPINNING (caller holds `lock`, released while spinning and retaken after): polls for new work without the
    /// lock for up to the policy's window.
    @inline(never)
    private func spinUnlocking(_ worker: inout WorkerState) {
        worker.maySpin = false
        self.publishIdleLocked()
        let seen = self.pushes.current
        self.lock.unlock()
        // Yielding: the thread that will bring the work may be waiting for this very CPU (2 cores: an adder and two
        // workers).
        let caught = SpinPolicy.spin(
            from: cshim_clock_monotonic_ns(), budget: worker.policy.budgetNanos, yielding: true
        ) { self.pushes.current != seen || self.inbox.mayHoldWork } == .seen
        self.lock.lock()
        self.idle.endSpin()
        self.publishIdleLocked()
        if !caught { worker.policy.spinMissed() }
    }

    /// PARKED (caller holds `lock`, released while asleep and retaken after): note the CPU it parks on (for the
    /// wake decision's choice, see `IdleWorkers`), advertise, then look at the inbox once
    /// more (a push that missed the advertisement is seen here), then sleep until popped and unparked. A spurious
    /// return finds itself still in the idle line, leaves it, and looks for work again; one that finds itself popped
    /// (a wake decision took it meanwhile) first takes the notification its waker is about to send, so the next park
    /// does not return on a stale one (and the waker's `nextToWake` chain is not reused while the waker reads it).
    @inline(never)
    private func parkUnlocking(_ worker: inout WorkerState) {
        let parker = worker.parker
        parker.lastCPU = cshim_current_cpu()
        self.idle.parking(parker)
        self.publishIdleLocked()
        var notified = true
        if self.inbox.isEmpty {
            self.lock.unlock()
            notified = parker.park()
            self.lock.lock()
        }
        let signalled = self.idle.unparked(parker)
        self.publishIdleLocked()
        if signalled && !notified {
            self.lock.unlock()
            while !parker.park() {}  // the waker unparks after its unlock: soon
            self.lock.lock()
        }
        worker.woke(workArrivedAt: signalled ? parker.signalledAt : 0)
    }

    /// Runs `op` on this worker; returns whether it finished here (leaving its queue bookkeeping to the worker).
    @inline(__always)
    func runOnWorker(_ op: Unmanaged<SpindleOperation>, _ context: ThreadContext) -> Bool {
        context.deferrable = op.toOpaque()
        op._withUnsafeGuaranteedRef { self.run($0, context) }
        context.deferrable = nil
        let deferredFinish = context.deferredFinish
        context.deferredFinish = false
        return deferredFinish
    }

    /// The queue's side of an operation this thread took and ran (`runOnWorker` returned `finishedHere`), for a
    /// worker or a pool thread's serve. Caller holds `lock`. If it finished here, it left us its bookkeeping: unlink
    /// it, and release its waiters and reference after unlocking; if it still runs (a concurrent operation), the
    /// member list gets the reference back, unless it finished elsewhere and was unlinked meanwhile, when the
    /// reference is ours to drop after unlocking.
    @inline(__always)
    func settleRunLocked(_ op: Unmanaged<SpindleOperation>, finishedHere: Bool, into after: inout AfterUnlock) {
        if finishedHere {
            _ = op._withUnsafeGuaranteedRef { self.unlinkFinishedLocked($0, into: &after) }
            after.addFinished(op)
            after.outstandingDrops += 1
        } else if !op._withUnsafeGuaranteedRef({ QueueCore.handBackLocked($0) }) {
            assert(after.dropped == nil, "QueueCore: an earlier dropped reference was not released")
            after.dropped = op
        }
    }

    /// Pops the best ready operation, moves it to `dispatching` and takes a slot; the queue's reference to it
    /// passes to the caller. Caller holds `lock` and has checked `canDispatchLocked`.
    func takeNextLocked() -> Unmanaged<SpindleOperation> {
        self.reclaimStalledReservationsLocked()  // reserved work its owner sits on comes first (FastPath/Reservations)
        let link = self.ready.popHighest()!
        self.stats.noteRunning(self.slots.take())
        link._withUnsafeGuaranteedRef { op in
            op.placement.move(to: .taken)
            if op.isTimed { self.recordWaitLocked(op) }
            QueueCore.markDispatching(op)
        }
        return link
    }

    /// A worker's `start()` of `op` returned while `op` still executes (a concurrent operation): if it is still a
    /// member, the member list gets the queue's reference back (`taken` → `handedBack`) and this returns true; if it
    /// already finished elsewhere and was unlinked, the caller still owns the reference and must drop it after
    /// unlocking. Caller holds `lock`.
    @inline(__always)
    static func handBackLocked(_ op: SpindleOperation) -> Bool {
        guard op.placement == .taken else { return false }
        op.placement.move(to: .handedBack)
        return true
    }

    /// `enqueued` → `dispatching`, by whoever took the operation (from a bucket, or from its own reservation).
    @inline(__always)
    static func markDispatching(_ op: SpindleOperation) {
        _ = op.advanceState { $0.dispatching() }
    }

    /// Runs on the serving run loop's thread: dispatch one operation, then schedule the next perform if more work
    /// may start (one operation per perform, so the loop's other sources get their turn in between).
    func serveFromRunLoop() {
        let context = ThreadContext.current
        self.lock.lock()
        self.idle.performRan()
        if self.canDispatchLocked {
            self.dispatchOneUnlocking(context)
            self.lock.lock()
        }
        var after = AfterUnlock()
        after.wake.add(self.wakeOrSpawnLocked())
        self.lock.unlock()
        self.perform(&after)
    }

    /// Takes the best ready operation (caller holds `lock`, which this releases) and runs it, then settles the
    /// queue's reference to it (see `QueueCore`, "References"): the finish path's `operationDidFinish` already
    /// unlinked it if it finished, and the reference is dropped; if it still runs, the member list gets it back.
    @inline(never)
    private func dispatchOneUnlocking(_ context: ThreadContext) {
        let op = self.takeNextLocked()
        let cancelling = self.lifecycle.state == .cancelling  // as in `runNextUnlocking`
        var after = AfterUnlock()
        after.wake.add(self.wakeOrSpawnLocked())
        self.lock.unlock()
        self.perform(&after)
        if cancelling { op._withUnsafeGuaranteedRef { $0.cancel() } }
        let outer = context.queue
        context.queue = self.handle
        op._withUnsafeGuaranteedRef { self.run($0, context) }
        context.queue = outer
        let member = self.lock.withLock { op._withUnsafeGuaranteedRef { QueueCore.handBackLocked($0) } }
        if !member { op.release() }
    }

    /// Starts one operation on this thread (`ThreadContext.starting` names it meanwhile). Until this call, a
    /// `start()` of it elsewhere throws `operationEnqueued`; from it on, its own `start()` may move it out of
    /// `dispatching` on any thread (`queueCalledStart`: a `start()` that hops to another thread). A `start()` that throws without the operation ever executing (a custom `start`
    /// gone wrong) finishes it cancelled with that error, so its slot is never lost. (One that returns leaving it
    /// `dispatching` is left so: a group cancelled before it ran finishes only once its children are through.)
    private func run(_ op: SpindleOperation, _ context: ThreadContext) {
        self.tellHooksWillStart(op)  // one load without hooks (SpindleOperationQueue+Hooks)
        let outer = context.starting
        context.starting = Unmanaged.passUnretained(op).toOpaque()
        do {
            if type(of: op) == SpindleBlockOperation.self {
                try op.startAsItsQueue()  // only this call may claim it (no start() of its own to hop with)
            } else {
                op.queueIsCallingStart()  // from here its own start() may claim it, on any thread
                try op.start()
            }
            context.starting = outer
        } catch {
            context.starting = outer
            if op.currentState.lifecycle == .dispatching {
                op.cancel()
                op.completeExecution(error: error)
            }
        }
    }
}
