import CShim

/// The engine behind a `SpindleThreadPool`: a line of requests from the queues that run on it, and the threads that
/// serve them. The public handle owns it; its threads hold it too, so it outlives the handle until they have exited.
///
/// A request means "this queue may start one more operation now": a queue on the pool sends one for each operation
/// that could start (`IdleWorkers`, server `.pool`, counts them in `servesPending`), and a pool thread that pops it
/// calls the queue's `serveOnPool`, which takes the queue's best ready operation, runs it, and keeps going on the same
/// queue while operations finish on this thread and more can start, up to `QueueCore.poolBudget` of them; then it
/// asks for another request at the back of the line, so queues take turns. Each queue keeps its own width,
/// priorities, suspension, barriers and order; the pool decides only which thread serves which queue next.
///
/// Guards: every `var` is protected by `lock`, a leaf lock (nothing else is taken while it is held; queues take it
/// after releasing their own lock, never under it). `name` and `threadCount` are set once in `init`. The threads'
/// `ThreadParker`s are reached through `idleLine` under `lock`; `ThreadContext.poolOf` points a pool thread back
/// here (set by the thread itself).
///
/// Threads (all transitions under `lock`): STARTING (`starting`, a place reserved by a decision, the thread being
/// created after unlocking) → SERVING (`live`; the thread counts itself in) ⇄ IDLE (parked on its own
/// `ThreadParker`, in `idleLine`; LIFO, so the threads that served last, with warm caches, serve next and the others
/// stay asleep: a choice not measured here, where a queue's own workers wake first-parked-first because that measured
/// faster on this machine, see `IdleWorkers`) → POPPED (a decision took it: `wakeupsInFlight`) → SERVING;
/// SERVING → BLOCKED (inside a Spindle wait:
/// `blocked`, see below) → SERVING; SERVING → EXITED between two serves when there are more threads than the target
/// (a wait ended: some thread retires, so at most `threadCount` serve again once a serve in progress ends), or when
/// it has nothing to do and the pool is shutting down. A start that
/// fails frees its place and, when requests wait that no thread on its way will take, schedules a retry on the
/// process timer (1 ms, doubling with each failure in a row, at most 1 s); until it runs no decision starts a
/// thread. If the timer's own thread cannot start either: when every live thread is blocked in a wait (so no serve
/// ends and no request or wait may come to try again), the thread whose start failed runs the retry itself after
/// the backoff (`startThread`); otherwise the retry is dropped and the next request or wait tries again.
///
/// The target: `threadCount` threads serve at once. A pool thread that blocks in one of Spindle's waits
/// (`waitUntilFinished`, `waitUntilAllOperationsAreFinished`, `awaitTermination`, `addOperationAndWait`, a semaphore,
/// a wait group, a retry's backoff, `SpindleThread.join`, `SpindleRunLoopThread.shutdown`; not a bare
/// `SpindleCondition`)
/// tells the pool (`beginBlocking`), which may start or wake one more thread while it waits, up to
/// `maximumStandIns` more than `threadCount`: an operation that waits for other work on the same pool (a nested
/// queue, a group's children) does not starve it. Blocking outside Spindle (I/O, `sleep`) is not seen: such work
/// belongs on a queue with threads of its own.
///
/// The wake decision (`decideLocked`): while there are more requests than threads already on their way (woken,
/// being started, or the caller itself about to come back), wake the idle thread that parked last, else start a
/// thread if fewer than the target are alive; one thread per request, never more.
final class PoolCore: @unchecked Sendable {
    let lock = SpindleMutex(.adaptive)
    let name: String
    let threadCount: Int

    @exclusivity(unchecked) private var requests = PoolRequests()
    @exclusivity(unchecked) private var idleLine: [ThreadParker] = []
    @exclusivity(unchecked) private var wakeupsInFlight = 0
    @exclusivity(unchecked) private var live = 0
    @exclusivity(unchecked) private var starting = 0
    @exclusivity(unchecked) private var blocked = 0
    @exclusivity(unchecked) private var threads: [SpindleThread] = []
    @exclusivity(unchecked) private var shuttingDown = false
    @exclusivity(unchecked) private var spawnFailures = 0
    @exclusivity(unchecked) private var retryPending = false
    @exclusivity(unchecked) private var started = 0  // threads ever started: names them
    /// Threads that retired before their starter registered them: the starter detaches them instead.
    @exclusivity(unchecked) private var retiredEarly: [ObjectIdentifier] = []

    /// How many threads may stand in for blocked ones, beyond `threadCount`.
    static let maximumStandIns = 64

    init(name: String, threadCount: Int) {
        self.name = name
        self.threadCount = threadCount
    }

    /// Threads alive or being started that serve at once: `threadCount`, plus one for each thread blocked in a
    /// Spindle wait (at most `maximumStandIns`). Caller holds `lock`.
    private var targetLocked: Int { self.threadCount + min(self.blocked, PoolCore.maximumStandIns) }

    // MARK: - Requests

    /// `count` requests to serve `core` (see the type's notes), and the wake decision for them. `callerReturns`:
    /// the calling thread is a pool thread going back to the line right after. Caller holds no lock.
    func request(_ core: QueueCore, count: Int, callerReturns: Bool = false) {
        self.lock.lock()
        self.requests.push(core, count: count)
        let plan = self.decideLocked(callerReturns: callerReturns)
        self.lock.unlock()
        self.perform(plan)
    }

    /// What a decision leaves to do after unlocking: parkers to unpark (chained through `nextToWake`) and thread
    /// places to start.
    struct Plan {
        var firstWake: ThreadParker? = nil
        var starts = 0
    }

    /// The wake decision (see the type's notes). Caller holds `lock`.
    private func decideLocked(callerReturns: Bool = false) -> Plan {
        var plan = Plan()
        var coming = self.wakeupsInFlight + self.starting + (callerReturns ? 1 : 0)
        while self.requests.count > coming {
            if let parker = self.idleLine.popLast() {
                parker.inIdleLine = false
                parker.nextToWake = plan.firstWake
                plan.firstWake = parker
                self.wakeupsInFlight += 1
            } else if !self.retryPending && !self.shuttingDown && self.live + self.starting < self.targetLocked {
                self.starting += 1
                plan.starts += 1
            } else {
                break
            }
            coming += 1
        }
        return plan
    }

    /// Unparks and starts what a decision chose. Caller holds no lock.
    private func perform(_ plan: Plan) {
        PoolCore.unpark(plan.firstWake)
        for _ in 0..<plan.starts { self.startThread() }
    }

    /// Unparks the chain of parkers a decision took. Caller holds no lock.
    private static func unpark(_ first: ThreadParker?) {
        var next = first
        while let parker = next {
            next = parker.nextToWake
            parker.nextToWake = nil
            parker.unpark()
        }
    }

    // MARK: - The threads

    /// Starts the thread for a reserved place; on failure frees it (see the type's notes). When neither the thread
    /// nor the timer's thread could start and no thread of the pool would come back for the requests, the retry
    /// runs here, after its backoff: a loop, not a recursion, that ends when the starts it decides succeed, or the
    /// backoff reaches its cap (about 1 s in all), or a thread is free to serve again.
    private func startThread() {
        guard var delay = self.startOne() else { return }
        while true {
            QueueCore.pause(nanoseconds: delay)
            let plan = self.lock.withLock {
                self.retryPending = false
                return self.decideLocked()
            }
            PoolCore.unpark(plan.firstWake)
            var failedAgain: UInt64? = nil
            for _ in 0..<plan.starts {
                if let next = self.startOne() { failedAgain = next }
            }
            guard let next = failedAgain else { return }
            delay = next
        }
    }

    /// One start for a reserved place. Returns nil when it started, or when it failed and the retry is scheduled
    /// or left to the next event; else the backoff after which the caller runs the retry itself.
    private func startOne() -> UInt64? {
        let index = self.lock.withLock {
            self.started += 1
            return self.started
        }
        let thread: SpindleThread
        do {
            thread = try SpindleThread.spawnJoinable(name: "spindle.p\(index)") { [self] in
                self.threadLoop(name: "spindle.p\(index)")
            }
        } catch {
            return self.threadFailedToStart(error)
        }
        var exited: [SpindleThread] = []
        let recoveredFrom = self.lock.withLock {
            defer { self.spawnFailures = 0 }
            if let i = self.retiredEarly.firstIndex(of: ObjectIdentifier(thread)) {
                self.retiredEarly.remove(at: i)
                thread.relinquish()  // it retired already: detached, as it would have detached itself
            } else if self.shuttingDown {
                exited.append(thread)
            } else {
                self.threads.append(thread)
            }
            return self.spawnFailures
        }
        PoolCore.join(exited)
        if recoveredFrom > 0 {
            SpindleDiagnostics.report(.workerSpawnRecovered(queue: self.name, failures: recoveredFrom))
        }
        return nil
    }

    /// A thread's life: serve requests; park when there are none; leave when shutting down or surplus. After each
    /// serve the thread gets its `name` back if an operation changed it (its priority is put back after each
    /// operation already), so one queue's operation never sees what another queue's left on the thread.
    private func threadLoop(name: String) {
        let context = ThreadContext.current
        context.poolOf = self
        let parker = ThreadParker()
        self.lock.lock()
        self.starting -= 1
        self.live += 1
        while true {
            // More threads than the target (a wait ended): this one retires, handing waiting requests on below.
            if self.live + self.starting > self.targetLocked { break }
            if let core = self.requests.pop() {
                self.lock.unlock()
                core._withUnsafeGuaranteedRef { $0.serveOnPool() }
                core.release()  // may free the queue, and with its last queue a pool's handle (never this core)
                if context.thread.name != name { context.thread.name = name }
                self.lock.lock()
                continue
            }
            if self.shuttingDown { break }
            parker.inIdleLine = true
            self.idleLine.append(parker)
            self.lock.unlock()
            let notified = parker.park()
            self.lock.lock()
            if parker.inIdleLine {  // a spurious return (the fault seam): leave the line and look again
                self.idleLine.removeAll { $0 === parker }
                parker.inIdleLine = false
            } else {
                self.wakeupsInFlight -= 1
                if !notified {
                    // Popped, but the park returned before the notification (the fault seam): take it now, as a
                    // queue worker does, so the next park does not return on it while this thread is in the line
                    // again (and a second wake decision does not reuse the parker while its waker still reads it).
                    self.lock.unlock()
                    while !parker.park() {}  // the waker unparks after its unlock: soon
                    self.lock.lock()
                }
            }
        }
        self.live -= 1
        // A retiring thread (not a shutdown: that joins every thread) detaches itself, so nobody has to join it.
        var detach: SpindleThread? = nil
        if !self.shuttingDown {
            let me = context.thread
            if let i = self.threads.firstIndex(where: { $0 === me }) {
                detach = self.threads.remove(at: i)
            } else {
                self.retiredEarly.append(ObjectIdentifier(me))  // its starter has not registered it yet
            }
        }
        // A surplus thread leaving may leave requests that a woken one should take.
        let plan = self.decideLocked()
        self.lock.unlock()
        self.perform(plan)
        detach?.relinquish()
        context.poolOf = nil
    }

    /// A start failed: free the place; if requests wait that no thread on its way will take, retry later, on the
    /// timer's thread. Returns the backoff when that thread cannot start either and the caller must run the retry
    /// itself: every live thread is blocked in a wait (none would come back for the requests, and no later wait
    /// or request may come to try again), the pool is not shutting down, and the backoff is below its cap.
    private func threadFailedToStart(_ error: SpindleError) -> UInt64? {
        var errno: Int32 = -1
        if case .system(_, let code) = error { errno = code }
        let delay: UInt64? = self.lock.withLock {
            self.starting -= 1
            self.spawnFailures += 1
            // Requests that no thread on its way will take: a busy thread may never come back for them (it may be
            // blocked for good), so the start is retried.
            let uncovered = self.requests.count > self.wakeupsInFlight + self.starting
            guard uncovered && !self.retryPending && !self.shuttingDown else { return nil }
            self.retryPending = true
            return IdleWorkers.retryDelay(afterFailures: self.spawnFailures)
        }
        SpindleDiagnostics.report(.workerSpawnFailed(queue: self.name, errno: errno, retryNanoseconds: delay ?? 0))
        guard let delay else { return nil }
        let retry = Retry(pool: self, after: delay)
        let timerFailure = DeadlineTimer.shared.insert(retry)
        guard timerFailure != 0 else { return nil }
        DeadlineTimer.shared.remove(retry)
        let inPlace = self.lock.withLock {
            let inPlace = self.live <= self.blocked && !self.shuttingDown && delay < IdleWorkers.maximumRetryDelay
            if !inPlace { self.retryPending = false }  // a thread serving, or the next request or wait, tries again
            return inPlace
        }
        SpindleDiagnostics.report(.deadlineTimerFailedToStart(errno: timerFailure))
        return inPlace ? delay : nil
    }

    /// A retry of a failed start, on the process timer.
    final class Retry: TimerEntry, @unchecked Sendable {
        let pool: PoolCore

        init(pool: PoolCore, after delay: UInt64) {
            self.pool = pool
            super.init(deadline: cshim_clock_monotonic_ns() &+ delay)
        }

        override func fire() { self.pool.retry() }
    }

    /// The timer's retry: threads may start again; decide for the requests waiting.
    private func retry() {
        self.lock.lock()
        self.retryPending = false
        let plan = self.decideLocked()
        self.lock.unlock()
        self.perform(plan)
    }

    /// A served queue's termination wait began: the pool decides again for the requests waiting, as the next
    /// request would. After its starts gave up (`threadFailedToStart`: no thread alive, the timer's thread could not
    /// start either), a shut-down queue sends no more requests, so its wait is what tries again.
    func decideAgain() {
        self.lock.lock()
        let plan = self.decideLocked()
        self.lock.unlock()
        self.perform(plan)
    }

    // MARK: - Blocking in a wait

    /// The calling pool thread is about to block in a Spindle wait: one more thread may serve meanwhile.
    func beginBlocking() {
        self.lock.lock()
        self.blocked += 1
        let plan = self.decideLocked()
        self.lock.unlock()
        self.perform(plan)
    }

    /// The wait is over: if that leaves more threads than the target and one is idle, it is woken to retire (a
    /// busy surplus thread retires when it next finds nothing to do).
    func endBlocking() {
        var retiring: ThreadParker? = nil
        self.lock.withLock {
            self.blocked -= 1
            if self.live + self.starting > self.targetLocked, self.requests.count <= self.wakeupsInFlight,
                let parker = self.idleLine.popLast()
            {
                parker.inIdleLine = false
                self.wakeupsInFlight += 1
                retiring = parker
            }
        }
        retiring?.unpark()
    }

    // MARK: - Shutdown and statistics

    /// The handle is gone (so is every queue on the pool, and with them every request): wake the idle threads to
    /// leave, and join them all, except the calling thread if it is one of them (it detaches itself: it leaves its
    /// loop right after).
    func shutdown() {
        var plan = Plan()
        let threads: [SpindleThread] = self.lock.withLock {
            self.shuttingDown = true
            while let parker = self.idleLine.popLast() {
                parker.inIdleLine = false
                parker.nextToWake = plan.firstWake
                plan.firstWake = parker
                self.wakeupsInFlight += 1
            }
            defer { self.threads = [] }
            return self.threads
        }
        self.perform(plan)
        PoolCore.join(threads)
    }

    /// Joins each thread, detaching the calling thread instead if it is one of them.
    private static func join(_ threads: [SpindleThread]) {
        QueueCore.join(threads)
    }

    /// Threads alive (serving, idle or blocked) and being started.
    var threadsAlive: Int { self.lock.withLock { self.live + self.starting } }

    /// Threads parked with nothing to do.
    var threadsIdle: Int { self.lock.withLock { self.idleLine.count } }

    /// Requests waiting for a thread.
    var requestsWaiting: Int { self.lock.withLock { self.requests.count } }
}

// MARK: - Blocking from a pool thread

extension ThreadContext {
    /// Runs `body`, a wait that may block, telling this thread's pool (if it is a pool thread, and only at the
    /// outermost such wait) so that another thread can serve meanwhile.
    @inline(__always)
    func blocking<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        guard let pool = self.poolOf, self.blockingDepth == 0 else { return try body() }
        self.blockingDepth = 1
        pool.beginBlocking()
        defer {
            pool.endBlocking()
            self.blockingDepth = 0
        }
        return try body()
    }
}
