/// The queue's worker threads as the wake decision sees them, and that decision: how to get one more operation
/// running (wake a parked worker, start a thread, ask the serving run loop, or nothing). A unit of the queue's
/// locked state: a value stored in `QueueCore` and guarded by `QueueCore.lock`. It decides and never acts: the
/// caller unparks the worker, starts the thread or schedules the perform after unlocking, and publishes
/// `hintWord` to `IdleHints` after every change (the adding thread's lock-free view of this unit).
///
/// Fields (all under `QueueCore.lock`):
/// - `threads`: the workers started and not yet taken to be joined (`takeThreads`); `live`: workers started and
///   not yet out of their loop (`threadStarted` adds one, `workerExited` takes one; a worker can exit before its
///   starter registers it, so `live` may be -1 while `starting` is 1); `starting`: places reserved for threads
///   being created;
/// - `parked`: workers between `parking` and `unparked`; of them, `wakeupsInFlight` were popped by a wake decision
///   (their `ThreadParker` handed to a waker) and have not yet come back; the others wait in the idle line
///   (`idleFirst` … `idleLast`, linked both ways through `ThreadParker.nextParked`/`previousParked`; `idleCount` of
///   them). A wake takes the worker that parked first, as a condition variable or libdispatch's semaphore would,
///   with one preference: among the first `cpuScan` (4) in line, the first one that parked on the waker's CPU
///   (`ThreadParker.lastCPU`, the caller's `wakerCPU`). The scheduler tends to put a woken thread back on the CPU
///   it left when that CPU is idle, and waking an idle vCPU is the dearest step of a hand-off on a virtual machine
///   (it halts: 15–30 µs here); a worker that left the waker's CPU tends to run there, right after the waker
///   blocks or sleeps. Measured in `BENCHMARKS.md` ("Which parked worker to wake"). Waking the one that parked
///   last (LIFO, tokio's and Go's choice, for a warm cache) measured slower on this 2-vCPU machine
///   (submit→run→signal round trip, same waiter: 30–39 µs LIFO against 14–19 µs FIFO, with far fewer CPU
///   migrations);
/// - `spinning`: a worker is polling for work without the lock (at most one). While one spins, or while a woken
///   worker is on its way (`wakeupsInFlight > 0`), a decision for one event's operation wakes nobody: that worker
///   takes the work and decides the next wake itself (`wakeOrSpawn`'s hand-off rule; a batch decision wakes while
///   fewer than the operations it can start are on their way);
/// - `servesPending`: for a queue served by a run loop or a thread pool (`server`), the requests to serve it that
///   were sent and have not begun (`serveBegan`): at most one perform on a run loop; on a pool, at most as many as
///   operations could start now (`min(ready, limit - running)`), so every request finds work unless a taker came
///   first; `serving`: pool threads serving the queue now (between `serveBegan` and `serveEnded`), counted as workers
///   in their loop for termination;
/// - `spawnFailures`: thread starts failed in a row (0 after one succeeds); `retryPending`: after a failure, a
///   retry is scheduled on the process timer (`QueueCore.SpawnRetry`; or run by the failing thread itself when
///   the timer's thread cannot start), and until it runs no event starts a thread
///   (so a process out of threads is not hammered with `pthread_create` on every add; the retry's backoff
///   doubles from 1 ms to 1 s).
///
/// Invariants (`check()`, asserted in debug builds after every change):
/// `0 <= wakeupsInFlight <= parked`, `idleCount == parked - wakeupsInFlight`,
/// `parked + (spinning ? 1 : 0) <= live + starting`, `starting >= 0`, `live + starting >= 0`; a queue served by
/// a run loop or a pool has no threads of its own; `servesPending >= 0`, and 0 for a queue with its own threads.
///
/// A worker's states, as this unit counts them (transitions under the lock, by the worker itself unless noted):
/// BUSY → SPINNING (`beginSpin`, only if nobody spins) → BUSY (work seen) or PARKED;
/// BUSY → PARKED, in the idle line (`parking`) → POPPED (`wakeOrSpawn` returned `.signal`, or `wakeAll` at
/// shutdown, by any thread) → BUSY (`unparked`, after its `park` returned); PARKED in the stack → BUSY directly
/// (`unparked`) when it saw work before sleeping or `park` returned spuriously.
/// A thread is STARTING (`wakeOrSpawn` returned `.spawn`, by any thread) → BUSY (`threadStarted`) → EXITED
/// (`workerExited`, once the queue is stopping), or gone (`threadFailedToStart`, which sets `retryPending`;
/// `retryStarted` clears it when the retry runs, on the timer or, if the timer's thread could not start, on the
/// thread whose start failed; or `timerRefusedRetry` clears it when nobody runs it, and the next event starts a
/// thread).
/// A queue served by a run loop or a pool has no worker states: a request is SENT (`wakeOrSpawn` returned
/// `.performOnRunLoop` or `.serveOnPool`, `servesPending += 1`) → BEGUN (`serveBegan`, by the thread serving it,
/// which then takes work if any is left) — see `QueueCore+Pool`.
struct IdleWorkers {
    /// What to do after unlocking so that one more operation runs. `signal` carries the popped worker's parker
    /// (retained: the waker unparks it); `spawn` carries the new thread's index, which names it (`spindle.wN`).
    enum WakeAction: Equatable {
        case none, signal(ThreadParker), spawn(Int), performOnRunLoop, serveOnPool

        static func == (a: WakeAction, b: WakeAction) -> Bool {
            switch (a, b) {
            case (.none, .none), (.performOnRunLoop, .performOnRunLoop), (.serveOnPool, .serveOnPool): true
            case (.signal(let x), .signal(let y)): x === y
            case (.spawn(let x), .spawn(let y)): x == y
            default: false
            }
        }
    }

    private(set) var threads: [SpindleThread] = []
    private(set) var live = 0
    private(set) var starting = 0
    private(set) var parked = 0
    private(set) var wakeupsInFlight = 0
    private var idleFirst: ThreadParker? = nil
    private unowned(unsafe) var idleLast: ThreadParker? = nil
    private(set) var idleCount = 0
    private(set) var spinning = false
    private(set) var servesPending = 0
    private(set) var serving = 0
    private(set) var spawnFailures = 0
    private(set) var retryPending = false

    /// Who runs the queue's operations (immutable).
    enum Server: Equatable {
        /// Its own worker threads (started as needed, up to the width).
        case ownThreads
        /// A run loop's thread, one operation per perform (the main queue).
        case runLoop
        /// A shared `SpindleThreadPool`'s threads, one request per operation that could start.
        case pool
    }

    let server: Server

    init(server: Server) { self.server = server }

    init(servedByRunLoop: Bool) { self.init(server: servedByRunLoop ? .runLoop : .ownThreads) }

    /// The queue is served by a run loop instead of threads.
    var servedByRunLoop: Bool { self.server == .runLoop }

    /// A run loop's perform is scheduled and has not run yet.
    var performPending: Bool { self.server == .runLoop && self.servesPending > 0 }

    /// Threads started (and not out of their loop) or being started.
    var threadCount: Int { self.live + self.starting }

    /// No worker is in its loop and none is being started: what `QueueLifecycle.workersGone` waits for.
    var noWorkers: Bool { self.live == 0 && self.starting == 0 && self.serving == 0 }

    /// The wake decision for one operation that could start now (`canDispatch`: ready work, a free slot, not
    /// suspended). `wanted`: operations running or ready (more threads than that would idle); `limit`: the width.
    /// `running`: operations holding a slot (a pool-served queue sends at most one request per operation that
    /// could start now, `min(wanted, limit) - running`).
    ///
    /// The hand-off rule (own threads): nobody is woken or started while a worker spins, or while `inFlightBelow`
    /// or more woken workers are still on their way (`wakeupsInFlight`). That worker takes the work, and when it
    /// takes an operation it makes this decision again for what is left (`QueueCore.runNextUnlocking`), so the
    /// wakes of a burst chain from worker to worker instead of all coming from the adding thread: one at a time,
    /// and only as long as work is left when each woken worker arrives. One event's operation passes 1 (the
    /// default); a batch decision (`QueueCore.collectWakeActionsLocked`) passes the operations that can start now,
    /// and wakes that many at once.
    ///
    /// `wakerCPU`: the CPU the deciding thread runs on (-1: unknown, or no preference); see the idle line above.
    mutating func wakeOrSpawn(
        canDispatch: Bool, shuttingDown: Bool, wanted: Int, limit: Int, running: Int = 0, inFlightBelow: Int = 1,
        wakerCPU: Int32 = -1
    ) -> WakeAction {
        guard canDispatch, !shuttingDown else { return .none }
        switch self.server {
        case .ownThreads: break
        case .runLoop:
            if self.servesPending > 0 { return .none }
            self.servesPending = 1
            return .performOnRunLoop
        case .pool:
            if self.servesPending >= min(wanted, limit) - running { return .none }
            self.servesPending += 1
            return .serveOnPool
        }
        if self.takerComing(inFlightBelow: inFlightBelow) { return .none }
        if let first = self.popIdle(preferring: wakerCPU) {
            self.wakeupsInFlight += 1
            return .signal(first)
        }
        let count = self.threadCount
        if count < limit && count < wanted && !self.retryPending {
            self.starting += 1  // reserved now, so concurrent decisions do not overshoot
            return .spawn(count)
        }
        return .none
    }

    /// A worker will see new work without being woken: one spins, or at least `inFlightBelow` woken ones are on
    /// their way.
    @inline(__always)
    func takerComing(inFlightBelow: Int = 1) -> Bool { self.spinning || self.wakeupsInFlight >= inFlightBelow }

    /// A thread from `.spawn` is running (it fills its reserved place). Returns the failures in a row that it
    /// ends (0 if the last start did not fail), for the caller to report.
    mutating func threadStarted(_ thread: SpindleThread) -> Int {
        precondition(self.starting > 0, "IdleWorkers: a thread started that nobody reserved")
        self.starting -= 1
        self.live += 1
        self.threads.append(thread)
        let failures = self.spawnFailures
        self.spawnFailures = 0
        return failures
    }

    /// A thread from `.spawn` could not be created: its place is free again, and no event starts a thread until
    /// the retry runs. Returns how long the caller should wait before retrying (1 ms, doubling with each failure
    /// in a row, at most 1 s); the caller schedules it on the timer, or calls `timerRefusedRetry`.
    mutating func threadFailedToStart() -> UInt64 {
        precondition(self.starting > 0, "IdleWorkers: a thread failed that nobody reserved")
        self.starting -= 1
        self.spawnFailures += 1
        self.retryPending = true
        return IdleWorkers.retryDelay(afterFailures: self.spawnFailures)
    }

    /// A worker left its loop (the queue is stopping).
    mutating func workerExited() { self.live -= 1 }

    /// The threads to join, taken out (each is joined by exactly one caller).
    mutating func takeThreads() -> [SpindleThread] {
        defer { self.threads = [] }
        return self.threads
    }

    /// The scheduled retry runs now: events may start threads again.
    mutating func retryStarted() { self.retryPending = false }

    /// The timer could not take the retry after a failed start with backoff `delay` (its thread did not start).
    /// Returns true if the thread whose start failed must run it itself: that thread is not one of this queue's
    /// workers (`callerIsWorker`: a worker may hold an operation it has taken and not yet run), or no worker is in
    /// its loop (none would come back for the work); the queue is not stopping; and the backoff is below its cap
    /// (so a caller is held about 1 s at most in all). Otherwise clears `retryPending`: a worker comes back for the
    /// work, or the next event starts a thread (see `QueueCore+Spawning`).
    mutating func timerRefusedRetry(delay: UInt64, shuttingDown: Bool, callerIsWorker: Bool) -> Bool {
        if (!callerIsWorker || self.live <= 0) && !shuttingDown && delay < IdleWorkers.maximumRetryDelay {
            return true
        }
        self.retryPending = false
        return false
    }

    /// The backoff's cap: 1 s.
    static let maximumRetryDelay: UInt64 = 1_000_000_000

    /// The wait before retrying after `failures` failed starts in a row: 1 ms doubled each time, at most 1 s.
    static func retryDelay(afterFailures failures: Int) -> UInt64 {
        let shift = UInt64(min(max(failures - 1, 0), 10))
        return min(1_000_000 << shift, IdleWorkers.maximumRetryDelay)
    }

    /// Whether a queue's workers may spin at all before parking: only in a queue of width 1, whose one worker is
    /// the only thread that can take the next operation. In a wider queue an idle worker parks at once, and the next
    /// operation wakes a parked one, preferring one that parked on the waker's CPU (see the idle line above): a
    /// spinner holds a second CPU, so the thread it serves sleeps on a CPU that halts, and waking a halted vCPU is
    /// the dearest step of a hand-off here. Measured (`BENCHMARKS.md`, "Which worker to wake, and which may
    /// spin"): the submit→run→signal round trip at width 2 went from 12.0–19.3 µs (median 17.0) to 8.4–13.1 µs
    /// (median 9.0), seven suite runs each; empty operations at width CPUs unchanged; at width 1 the spin still
    /// pays (round trips 16–26 µs with it, 53–60 µs without, in a probe).
    static func spinningAllowed(width: Int) -> Bool { width == 1 }

    /// A worker wants to spin; returns false if another one already does (then it parks instead).
    mutating func beginSpin() -> Bool {
        if self.spinning { return false }
        self.spinning = true
        return true
    }

    /// The spinning worker is back under the lock.
    mutating func endSpin() {
        precondition(self.spinning, "IdleWorkers: endSpin without beginSpin")
        self.spinning = false
    }

    /// A worker is about to park on `parker`: it joins the end of the idle line.
    mutating func parking(_ parker: ThreadParker) {
        precondition(!parker.inIdleLine, "IdleWorkers: a worker parked twice")
        self.parked += 1
        parker.inIdleLine = true
        parker.previousParked = self.idleLast
        if let last = self.idleLast { last.nextParked = parker } else { self.idleFirst = parker }
        self.idleLast = parker
        self.idleCount += 1
    }

    /// A parked worker is back under the lock. Returns whether a wake decision had popped it (it was signalled);
    /// if not (it saw work before sleeping, or its park returned spuriously) it leaves the idle line here.
    mutating func unparked(_ parker: ThreadParker) -> Bool {
        precondition(self.parked > 0, "IdleWorkers: unparked without parking")
        self.parked -= 1
        if parker.inIdleLine {
            self.removeFromIdle(parker)
            return false
        }
        precondition(self.wakeupsInFlight > 0, "IdleWorkers: a popped worker without a wakeup in flight")
        self.wakeupsInFlight -= 1
        return true
    }

    /// The queue is stopping: pops every parked worker; the caller unparks them after unlocking.
    mutating func wakeAll() -> WakePlan {
        var plan = WakePlan()
        while let first = self.popIdle() {
            self.wakeupsInFlight += 1
            plan.add(.signal(first))
        }
        return plan
    }

    /// How far into the idle line a wake looks for a worker that parked on the waker's CPU (so a wake stays O(1)).
    static let cpuScan = 4

    /// Takes the first of the first `cpuScan` parked workers that parked on `cpu`, or else the first in line.
    private mutating func popIdle(preferring cpu: Int32 = -1) -> ThreadParker? {
        guard let first = self.idleFirst else { return nil }
        var chosen = first
        if cpu >= 0 {
            var candidate: ThreadParker? = first
            var looked = 0
            while let c = candidate, looked < IdleWorkers.cpuScan {
                if c.lastCPU == cpu {
                    chosen = c
                    break
                }
                candidate = c.nextParked
                looked += 1
            }
        }
        self.removeFromIdle(chosen)
        return chosen
    }

    /// Unlinks `parker` from the idle line, wherever it is.
    private mutating func removeFromIdle(_ parker: ThreadParker) {
        precondition(parker.inIdleLine, "IdleWorkers: unlinking a parker that is not in the idle line")
        let next = parker.nextParked
        let previous = parker.previousParked
        if let previous { previous.nextParked = next } else { self.idleFirst = next }
        if let next { next.previousParked = previous } else { self.idleLast = previous }
        parker.nextParked = nil
        parker.previousParked = nil
        parker.inIdleLine = false
        self.idleCount -= 1
    }

    /// A request sent to the serving run loop or pool has begun (it takes the work, if any is left). With
    /// `counting` (a pool's serve of a queue not yet terminated), it counts as a worker in its loop until
    /// `serveEnded`, so the queue terminates only after it.
    mutating func serveBegan(counting: Bool = false) {
        precondition(self.servesPending > 0, "IdleWorkers: a serve began that nobody requested")
        self.servesPending -= 1
        if counting { self.serving += 1 }
    }

    /// A pool thread's serve is over: everything it held was released.
    mutating func serveEnded() {
        precondition(self.serving > 0, "IdleWorkers: a serve ended that had not begun")
        self.serving -= 1
    }

    /// The serving run loop ran the scheduled perform.
    mutating func performRan() { self.serveBegan() }

    /// The lock-free summary for adding threads (see `IdleHints`): whether a worker will see new work unwoken
    /// (`takerComing`: one spins or a woken one is on its way; an add then need not take the lock, as the wake
    /// decision would be "nothing"), whether a parked worker is still unsignalled, and whether a thread may be
    /// started under `limit`.
    func hintWord(limit: Int) -> UInt8 {
        var word: UInt8 = 0
        if self.takerComing() { word |= IdleHints.takerComingBit }
        if self.idleFirst != nil { word |= IdleHints.parkedBit }
        if self.server == .ownThreads && self.threadCount < limit && !self.retryPending { word |= IdleHints.canSpawnBit }
        return word
    }

    /// The invariants above.
    func check() -> Bool {
        self.wakeupsInFlight >= 0 && self.wakeupsInFlight <= self.parked && self.starting >= 0
            && self.idleCount == self.parked - self.wakeupsInFlight && (self.idleCount == 0) == (self.idleFirst == nil)
            && self.parked + (self.spinning ? 1 : 0) <= self.threadCount && self.threadCount >= 0
            && (self.server == .ownThreads ? self.servesPending == 0 : (self.threadCount == 0 && self.threads.isEmpty))
            && self.servesPending >= 0 && self.serving >= 0
    }
}
