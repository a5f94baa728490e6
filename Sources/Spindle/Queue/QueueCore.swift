/// The engine behind a `SpindleOperationQueue`: its operations, ready buckets, slots and pool of worker threads.
/// The public handle owns it; workers hold it too, so it outlives the handle until the workers have exited.
///
/// Guards: every `var` below is protected by `lock` (the mutex shared by `workAvailable` and `drained`), except
/// `handle` (set once in `init`; valid while any operation is a member, since members retain the handle).
/// Operations' queue links (`bucket*`, `member*`, `isHeld`) are protected by this lock too.
/// Lock order: `DependencyGraph.lock` → `lock` → an operation's `locked`. User code never runs under `lock`.
///
/// Scheduling, O(1) per event, no rescans:
/// - an operation that is not ready costs nothing until its readiness count reaches zero (or it is cancelled);
///   then it claims its `scheduled` bit and `scheduleReady` pushes it into `ready`;
/// - a worker takes the highest-priority ready operation when `running < limit` and not suspended;
/// - each event that makes one operation runnable wakes one parked worker, or spawns a thread if none is idle
///   and fewer than `limit` exist (`wakeOrSpawnLocked`).
///
/// Barriers: operations added while a barrier is pending are `held` (FIFO, with the barriers among them). The
/// first held barrier is released when every operation before it has finished (`activeUnfinished == 0`); the
/// operations behind it are released when it finishes.
///
/// Lifecycle: `running` (accepting and running work) → `shuttingDown` (the handle was released; only possible
/// with no members, since members retain the handle) → workers exit and are joined (a worker that performs the
/// shutdown itself is detached instead, as it is about to exit). Forward only.
final class QueueCore: @unchecked Sendable {
    let lock = SpindleMutex(.normal)
    let workAvailable: SpindleCondition
    let drained: SpindleCondition
    unowned(unsafe) var handle: SpindleOperationQueue?

    var name: String
    var ready = ReadyBuckets()
    var memberHead: SpindleOperation?
    unowned(unsafe) var memberTail: SpindleOperation?
    var memberCount = 0  // all members, barriers included
    var barrierCount = 0
    var running = 0  // dispatched and not finished: slots in use
    var requestedLimit: Int
    var limit: Int
    var suspended = false
    var threads: [SpindleThread] = []
    var parked = 0  // workers waiting on workAvailable
    var wakeupsInFlight = 0  // signals sent to parked workers not yet consumed
    var shuttingDown = false
    var activeUnfinished = 0  // non-barrier members released (not held) and not finished
    var held: [SpindleOperation] = []
    var heldHead = 0
    var barrierActive = false
    var finishedCount = 0
    var cancelledCount = 0
    /// For a queue served by a run loop (the main queue) instead of a pool: that loop, and whether a perform that
    /// will dispatch from it is already scheduled (at most one at a time).
    let servingRunLoop: SpindleRunLoop?
    var performPending = false
    /// Async drain waiters (`waitUntilAllOperationsAreFinished() async`), each signalled once when the queue
    /// drains; nil (not empty) whenever there are none, so the finish path tests one rarely-set field.
    var asyncDrainWaiters: [SpindleSemaphore]? = nil

    init(name: String, limit: Int, servingRunLoop: SpindleRunLoop? = nil) {
        self.servingRunLoop = servingRunLoop
        self.name = name
        self.requestedLimit = limit
        self.limit = QueueCore.resolve(limit)
        self.workAvailable = SpindleCondition(sharing: self.lock)
        self.drained = SpindleCondition(sharing: self.lock)
    }

    static func resolve(_ requested: Int) -> Int {
        requested == SpindleOperationQueue.defaultMaxConcurrentOperationCount ? spindleActiveProcessorCount() : requested
    }

    // MARK: - Admission (under lock)

    /// Links a claimed operation as a member, released or held behind a barrier. Caller holds `lock`.
    func admitLocked(_ op: SpindleOperation) {
        op.isAdmitted = true
        op.memberNext = nil
        op.memberPrev = self.memberTail
        if let tail = self.memberTail { tail.memberNext = op } else { self.memberHead = op }
        self.memberTail = op
        self.memberCount += 1
        if op.isBarrier { self.barrierCount += 1 }
        if op.isBarrier || self.barrierActive || self.heldHead < self.held.count {
            op.isHeld = true
            self.held.append(op)
            self.advanceBarriersLocked()
        } else {
            self.activeUnfinished += 1
        }
    }

    /// Releases held operations up to the next barrier, and that barrier once nothing before it is unfinished.
    func advanceBarriersLocked() {
        while !self.barrierActive && self.heldHead < self.held.count {
            let op = self.held[self.heldHead]
            if op.isBarrier && self.activeUnfinished > 0 { break }
            self.heldHead += 1
            if op.isBarrier { self.barrierActive = true } else { self.activeUnfinished += 1 }
            op.isHeld = false
            if op.currentState.isScheduled { self.pushLocked(op) }
        }
        if self.heldHead == self.held.count {
            self.held.removeAll(keepingCapacity: true)
            self.heldHead = 0
        } else if self.heldHead > 64 && self.heldHead * 2 > self.held.count {
            self.held.removeFirst(self.heldHead)
            self.heldHead = 0
        }
    }

    /// Puts a scheduled operation in its bucket unless it is held behind a barrier, already in one, not (or no
    /// longer) a member, or already taken by a worker: safe to call for a stale request. Caller holds `lock`.
    func pushLocked(_ op: SpindleOperation) {
        guard op.isAdmitted, !op.isHeld, op.bucketLevel < 0, op.currentState.lifecycle == .enqueued else { return }
        let level = op.isBarrier ? ReadyBuckets.barrierLevel : op.queuePriority.bucket
        self.ready.push(op, level: level)
    }

    /// Right after admission: push it if someone already claimed its scheduled bit (a cancel or a finishing
    /// dependency racing the add, whose own request was ignored while it was not yet a member), else claim it if
    /// ready. Caller holds `lock`.
    func scheduleAdmittedLocked(_ op: SpindleOperation) {
        if op.currentState.isScheduled {
            self.pushLocked(op)
        } else {
            self.scheduleIfReadyLocked(op)
        }
    }

    /// Claims the scheduled bit of a ready member during admission. Caller holds `lock`.
    func scheduleIfReadyLocked(_ op: SpindleOperation) {
        var current = op.currentState
        while let next = current.scheduling() {
            let (done, seen) = op.state.compareExchange(
                expected: current.raw, desired: next.raw, ordering: .acquiringAndReleasing)
            if done {
                self.pushLocked(op)
                return
            }
            current = OperationState(raw: seen)
        }
    }

    // MARK: - Events from operations

    /// An enqueued operation became ready and claimed its scheduled bit (from any thread).
    func scheduleReady(_ op: SpindleOperation) {
        self.lock.lock()
        self.pushLocked(op)
        let action = self.wakeOrSpawnLocked()
        self.lock.unlock()
        self.perform(action)
    }

    /// A member finished (called by its finish path, after its completion block and dependents, before its
    /// waiters are released).
    func operationDidFinish(_ op: SpindleOperation) {
        self.lock.lock()
        if let prev = op.memberPrev { prev.memberNext = op.memberNext } else { self.memberHead = op.memberNext }
        if let next = op.memberNext { next.memberPrev = op.memberPrev } else { self.memberTail = op.memberPrev }
        op.memberNext = nil
        op.memberPrev = nil
        op.isAdmitted = false
        self.memberCount -= 1
        self.running -= 1
        self.finishedCount += 1
        if op.isCancelled { self.cancelledCount += 1 }
        if op.isBarrier {
            self.barrierCount -= 1
            self.barrierActive = false
        } else {
            self.activeUnfinished -= 1
        }
        if self.heldHead < self.held.count { self.advanceBarriersLocked() }
        let action = self.wakeOrSpawnLocked()
        if self.memberCount == 0 {
            self.drained.broadcast()
            if self.asyncDrainWaiters != nil { return self.releaseAsyncDrainWaitersUnlocking(then: action) }
        }
        self.lock.unlock()
        self.perform(action)
    }

    /// A member's priority changed: if it waits in a bucket, move it.
    func priorityChanged(_ op: SpindleOperation) {
        self.lock.withLock {
            guard op.bucketLevel >= 0, !op.isBarrier else { return }
            self.ready.remove(op)
            self.pushLocked(op)
        }
    }

    // MARK: - Workers

    enum WakeAction { case none, signal, spawn, performOnRunLoop }

    var canDispatchLocked: Bool { self.ready.count > 0 && self.running < self.limit && !self.suspended }

    /// Decides how to get one more operation running: wake a parked worker, start a thread, or nothing.
    /// Caller holds `lock`; it performs the action after unlocking (`perform`).
    func wakeOrSpawnLocked() -> WakeAction {
        guard self.canDispatchLocked, !self.shuttingDown else { return .none }
        if self.servingRunLoop != nil {
            if self.performPending { return .none }
            self.performPending = true
            return .performOnRunLoop
        }
        if self.parked > self.wakeupsInFlight {
            self.wakeupsInFlight += 1
            return .signal
        }
        if self.threads.count < self.limit && self.threads.count < self.running + self.ready.count {
            // Reserve the thread's place now so concurrent decisions do not overshoot; filled in by `perform`.
            self.threads.append(SpindleThread.main)
            return .spawn
        }
        return .none
    }

    /// Wake or spawn as many workers as there are operations that could start now. Caller holds `lock`.
    func collectWakeActionsLocked() -> [WakeAction] {
        var actions: [WakeAction] = []
        let room = max(0, min(self.ready.count, self.limit - self.running))
        for _ in 0..<room {
            let action = self.wakeOrSpawnLocked()
            if case .none = action { break }
            actions.append(action)
        }
        return actions
    }

    func perform(_ action: WakeAction) {
        switch action {
        case .none: return
        case .signal: self.workAvailable.signal()
        case .spawn: self.spawnWorker()
        case .performOnRunLoop: self.servingRunLoop!.perform(inModes: [.common]) { [self] in self.serveFromRunLoop() }
        }
    }

    private func spawnWorker() {
        let index = self.lock.withLock { self.threads.count - 1 }
        do {
            let thread = try SpindleThread.spawnJoinable(name: "spindle.w\(index)") { [self] in self.workerLoop() }
            let lateForShutdown = self.lock.withLock { () -> Bool in
                if let slot = self.threads.firstIndex(where: { $0 === SpindleThread.main }) {
                    self.threads[slot] = thread
                }
                return self.shuttingDown
            }
            // Shutdown ran while this thread was being created and did not see it: join it here.
            if lateForShutdown { try? thread.join() }
        } catch {
            // Out of threads: give the reservation back; existing workers keep going (at least one exists
            // unless this was the first, and then the next event retries).
            self.lock.withLock {
                if let slot = self.threads.firstIndex(where: { $0 === SpindleThread.main }) {
                    self.threads.remove(at: slot)
                }
            }
            writeToStandardError("Spindle: queue '\(self.name)' could not start a worker thread: \(error)")
        }
    }

    /// The worker's life: take the best ready operation, run it outside the lock, repeat; park when there is
    /// nothing it may run; exit when the queue shuts down. "Do not rename": profilers match on it.
    private func workerLoop() {
        let context = ThreadContext.current
        context.workerOf = self
        self.lock.lock()
        while !self.shuttingDown {
            // BUSY
            if self.canDispatchLocked {
                self.dispatchOneUnlocking(context)
                self.lock.lock()
                continue
            }
            // IDLE: a spurious wakeup finds nothing and parks again.
            self.parked += 1
            self.workAvailable.wait()
            self.parked -= 1
            if self.wakeupsInFlight > 0 { self.wakeupsInFlight -= 1 }
        }
        self.lock.unlock()
        context.workerOf = nil
    }

    // MARK: - Diagnostics

    /// Settings, counts, and every member not yet running with what it waits on.
    func debugSummary() -> String {
        self.lock.withLock {
            var lines = ["SpindleOperationQueue '\(self.name)': width \(self.limit) (requested \(self.requestedLimit)), "
                + "\(self.suspended ? "suspended" : "running"), members \(self.memberCount), running \(self.running), "
                + "ready \(self.ready.count), threads \(self.threads.count) (parked \(self.parked)), "
                + "held behind barriers \(self.held.count - self.heldHead), finished \(self.finishedCount)"]
            var node = self.memberHead
            while let op = node {
                let s = op.currentState
                var line = "  \(op.displayName): \(s.lifecycle)\(s.isCancelled ? ", cancelled" : "")"
                if s.lifecycle == .enqueued {
                    if op.isHeld {
                        line += ", held behind a barrier"
                    } else if s.isScheduled {
                        line += ", ready (priority \(op.queuePriority))"
                    } else {
                        let waits = op.dependencies.filter { !$0.isFinished }.map(\.displayName)
                        line += ", waits on \(s.pendingDependencies): \(waits.joined(separator: ", "))"
                    }
                }
                lines.append(line)
                node = op.memberNext
            }
            return lines.joined(separator: "\n")
        }
    }

    /// Runs on the serving run loop's thread: dispatch one operation, then schedule the next perform if more work
    /// may start (one operation per perform, so the loop's other sources get their turn in between).
    private func serveFromRunLoop() {
        let context = ThreadContext.current
        self.lock.lock()
        self.performPending = false
        if self.canDispatchLocked {
            self.dispatchOneUnlocking(context)
            self.lock.lock()
        }
        let next = self.wakeOrSpawnLocked()
        self.lock.unlock()
        self.perform(next)
    }

    /// Takes the best ready operation (caller holds `lock`, which this releases) and runs it. The operation is a
    /// local of this function, so the worker's reference to it is dropped on return, before the caller locks
    /// again: its release may free user objects (and even this queue), which must never happen under our lock.
    @inline(never)
    private func dispatchOneUnlocking(_ context: ThreadContext) {
        guard let op = self.ready.popHighest() else {
            self.lock.unlock()
            return
        }
        self.running += 1
        var s = op.currentState
        while let next = s.dispatching() {
            let (done, seen) = op.state.compareExchange(
                expected: s.raw, desired: next.raw, ordering: .acquiringAndReleasing)
            if done { break }
            s = OperationState(raw: seen)
        }
        let chained = self.wakeOrSpawnLocked()
        self.lock.unlock()
        self.perform(chained)
        context.queue = self.handle
        self.run(op)
        context.queue = nil
    }

    /// Starts one operation on this worker. A `start()` that throws without the operation ever executing (a
    /// custom `start` gone wrong) finishes it cancelled with that error, so its slot is never lost.
    private func run(_ op: SpindleOperation) {
        do {
            try op.start()
        } catch {
            if op.currentState.lifecycle == .dispatching {
                op.cancel()
                op.completeExecution(error: error)
            }
        }
    }

    // MARK: - Shutdown

    /// The handle is gone (so there are no members): stop and join the workers. A worker running this (the last
    /// operation released the queue from its finish path) detaches itself instead of joining itself.
    func shutdown() {
        let workers: [SpindleThread] = self.lock.withLock {
            self.shuttingDown = true
            self.workAvailable.broadcast()
            let list = self.threads.filter { $0 !== SpindleThread.main }
            return list
        }
        let me = ThreadContext.current.workerOf === self ? SpindleThread.current : nil
        for worker in workers {
            if worker === me {
                worker.relinquish()
            } else {
                try? worker.join()
            }
        }
    }
}
