import Synchronization

/// The process-wide pool of helper threads that run the extra blocks of block operations (see `BlockRun`).
///
/// Threads are created lazily, when a run asks for help and nobody is idle or on the way; a helper that finds
/// nothing to do parks on its own condition variable (no spinning), and one that stays parked for `idleTimeout`
/// (2 s by default, a timed wait on CLOCK_MONOTONIC) retires, so an idle process keeps no helper threads. There
/// is no global cap: a run asks for at most `SpindleBlockOperation.maximumHelperThreads` helpers, and the pool
/// holds as many threads as runs keep busy at once.
///
/// Why a *taker* count: a helper that just finished its blocks, or a parked one that was just woken, reaches the
/// pool's lock without running any user code, so it is certain to take a request queued for it promptly. Counting
/// those threads (`takers`) lets a request ride on a thread that is already awake instead of waking or creating
/// another: back-to-back operations with short blocks keep reusing the helper woken by the first one, while a
/// request that no taker covers still gets a thread of its own at once (a block that blocks never stops another
/// run's blocks). Each helper runs one run at a time.
///
/// Guards:
/// - `mutex` (a pthread mutex) protects `pending`, `idle`, `live`, `idleTimeoutNanos` and every helper's
///   `notified`; `ownersDone` and every helper's `wakeup` are conditions on it. Lock order: it is a leaf. No other
///   lock is taken while it is held, it is never taken with another lock of ours held, and no user code runs
///   under it, not even a deinit (no run is released under it).
/// - `takers` is an atomic. Invariant, whenever `mutex` is held: the *open* runs in `pending` are at most
///   `takers` (closed ones need nobody; runs only ever go from open to closed). It is incremented with or without
///   the lock (by `submit` when it wakes a parked helper, by a helper in `BlockRun.help` when it becomes a
///   taker), but decremented only under the lock (by the taker itself), so a decision taken under the lock on
///   its value stays true until the lock is released.
/// - `created` is an atomic counter (statistics for tests).
/// - A helper's `first` is written by the spawner before the thread exists and taken by the thread itself.
///
/// A helper's state machine:
/// - SPAWNED (created by `submit` for one request: `first` holds its run) → BUSY.
/// - BUSY (running `BlockRun.help`, outside the lock) → RETURNING once no block is left for it (it puts back its
///   thread's name and priority, adds itself to `takers`, then leaves the run).
/// - RETURNING (on its way to the lock, counted in `takers`) → under the lock it leaves `takers` (after waking
///   the run's owner if it was the last helper out of a closed run), then pops `pending` up to the first open run
///   → BUSY; closed runs popped on the way are released after unlocking; if none is open → PARKED.
/// - PARKED (in `idle`, `notified` false, timed wait on `wakeup` until `idleTimeout` after parking) → WOKEN when
///   `submit` pops it from `idle` (sets `notified`, counts it in `takers`, signals it); → RETIRED when its wait
///   times out un-notified (it leaves `idle`, `live` goes down). Spurious wakeups change nothing.
/// - WOKEN (counted in `takers`) → as RETURNING.
/// - RETIRED: the thread returns and exits.
///
/// `submit(run)`, under the lock: if the open runs in `pending` are fewer than `takers`, queue the request (a
/// taker will take it); else if a helper is parked, queue it and wake the most recently parked one (LIFO, so the
/// threads left parked longest are the extra ones, which retire); else spawn a helper with the run as its first
/// (after unlocking). If spawning fails (out of threads), the request is dropped: the threads already taking part
/// in that run run its blocks.
final class BlockHelperPool: @unchecked Sendable {
    /// The pool every block operation of this process uses (made again in a forked child: see `PerProcess`).
    static var shared: BlockHelperPool { BlockHelperPool.perProcess.current }
    private static let perProcess = PerProcess { BlockHelperPool() }
    /// The name of every helper thread.
    static let threadName = "spindle-block"

    fileprivate let mutex = SpindleMutex(.normal)
    /// Owners waiting in `waitForHelpers` for their run's last helper (broadcast by that helper, under `mutex`).
    private let ownersDone: SpindleCondition
    /// Requests for help that a taker will take, oldest first (protected by mutex).
    private var pending: [BlockRun] = []
    /// Parked helpers, most recently parked last (protected by mutex).
    private var idle: [BlockHelper] = []
    /// Helper threads alive: spawned (or being spawned) and not yet retired (protected by mutex).
    private var live = 0
    /// How long a parked helper waits for work before it retires (protected by mutex).
    private var idleTimeoutNanos: UInt64 = 2_000_000_000
    /// Helpers on their way to the lock that will take a pending request: see the type's notes.
    private let takers = Atomic<Int>(0)
    private let created = Atomic<Int>(0)

    init() { self.ownersDone = SpindleCondition(sharing: self.mutex) }

    // MARK: - Statistics and settings (tests)

    /// Helper threads created so far by this pool.
    var createdCount: Int { self.created.load(ordering: .relaxed) }

    /// Helper threads alive now (busy or parked).
    var liveCount: Int { self.mutex.withLock { self.live } }

    /// How long a parked helper waits for work before it retires. A new value applies from a helper's next park.
    var idleTimeout: Duration {
        get { self.mutex.withLock { .nanoseconds(Int64(clamping: self.idleTimeoutNanos)) } }
        set {
            let (seconds, attos) = newValue.clampedComponents
            var nanos: UInt64 = 0
            if seconds >= Int64(UInt64.max / 1_000_000_000) {
                nanos = UInt64.max  // saturates: such a helper never retires
            } else if seconds > 0 || (seconds == 0 && attos > 0) {
                nanos = UInt64(seconds) * 1_000_000_000 + UInt64(attos / 1_000_000_000)
            }
            self.mutex.withLock { self.idleTimeoutNanos = nanos }
        }
    }

    // MARK: - Requests

    /// Asks for one more thread to help `run`: a taker already on its way, a parked helper, or a new thread. Any
    /// thread; never runs user code; blocks only on the pool's lock (and `pthread_create`).
    func submit(_ run: BlockRun) {
        self.mutex.lock()
        // Closed requests need nobody (a taker drops them); they are not removed here, so that nothing is released
        // under the lock.
        var open = 0
        for queued in self.pending where !queued.isClosed { open += 1 }
        if open < self.takers.load(ordering: .sequentiallyConsistent) {
            self.pending.append(run)
            self.mutex.unlock()
            return
        }
        if let helper = self.idle.popLast() {
            self.pending.append(run)
            self.takers.add(1, ordering: .sequentiallyConsistent)
            helper.notified = true
            self.mutex.unlock()
            helper.wakeup.signal()
            return
        }
        self.live += 1
        self.mutex.unlock()
        let helper = BlockHelper(pool: self, first: run)
        do {
            try SpindleThread.detach(name: BlockHelperPool.threadName, entry: helper)
            self.created.add(1, ordering: .relaxed)
        } catch {
            // Out of threads: the threads already taking part in `run` run its blocks.
            helper.first = nil
            self.mutex.withLock { self.live -= 1 }
            if case .system(_, let errno) = error { SpindleDiagnostics.report(.blockHelperSpawnFailed(errno: errno)) }
        }
    }

    /// Called by a helper in `BlockRun.help` when it runs no more blocks, before it leaves the run: puts back the
    /// thread's default name and priority if a block changed them (the next run may belong to another operation),
    /// then counts the helper as a taker (from here until it reaches the lock it runs no user code).
    func helperIsReturning() {
        let thread = SpindleThread.current
        if thread.priority != 0.5 { thread.setPriority(0.5) }
        if thread.name != BlockHelperPool.threadName { thread.name = BlockHelperPool.threadName }
        self.takers.add(1, ordering: .sequentiallyConsistent)
    }

    /// The owner of `run`, after closing it: waits until no helper is inside it.
    func waitForHelpers(of run: BlockRun) {
        self.mutex.lock()
        while run.hasHelpersInside { self.ownersDone.wait() }
        self.mutex.unlock()
    }

    // MARK: - Helper threads

    /// A helper thread's life: runs its first run, then takes pending requests, parking in between, until it has
    /// been idle for `idleTimeout`.
    fileprivate func serve(_ helper: BlockHelper, first: BlockRun) {
        var run: BlockRun? = first
        // Closed requests taken off `pending`: released after unlocking (the lock is held as briefly as can be;
        // a run holds no blocks of its own, see `BlockRun`).
        var dropped: [BlockRun] = []
        while true {
            var wasLastOut = false
            if let current = run.take() { wasLastOut = current.help(pool: self) }  // released at the brace
            self.mutex.lock()
            // Broadcast under the lock: the owner checks its predicate under it too, so it cannot miss this.
            if wasLastOut { self.ownersDone.broadcast() }
            self.takers.subtract(1, ordering: .sequentiallyConsistent)  // the credit help() gave
            while run == nil {
                run = self.takeOpenRun(droppingClosedInto: &dropped)
                if run != nil { break }
                if !dropped.isEmpty {
                    // Not a taker any more, so nothing is waiting on us: release outside the lock, then look again.
                    self.mutex.unlock()
                    dropped.removeAll(keepingCapacity: true)
                    self.mutex.lock()
                    continue
                }
                if !self.park(helper) {
                    self.live -= 1
                    self.mutex.unlock()
                    return  // retired
                }
                self.takers.subtract(1, ordering: .sequentiallyConsistent)  // the credit the waker gave
            }
            self.mutex.unlock()
            dropped.removeAll(keepingCapacity: true)
        }
    }

    /// The oldest pending run that is still open; closed ones on the way are moved to `dropped`. Under `mutex`.
    private func takeOpenRun(droppingClosedInto dropped: inout [BlockRun]) -> BlockRun? {
        while !self.pending.isEmpty {
            let run = self.pending.removeFirst()
            if !run.isClosed { return run }
            dropped.append(run)
        }
        return nil
    }

    /// Parks `helper` until a waker pops it (true) or it was idle for `idleTimeout` (false: it has left `idle`).
    /// Under `mutex`, which the wait releases.
    private func park(_ helper: BlockHelper) -> Bool {
        helper.notified = false
        self.idle.append(helper)
        let (end, overflow) = SpindleDeadline.now.uptimeNanoseconds.addingReportingOverflow(self.idleTimeoutNanos)
        let deadline = overflow ? SpindleDeadline.distantFuture : SpindleDeadline(uptimeNanoseconds: end)
        while !helper.notified {
            if !helper.wakeup.wait(until: deadline), !helper.notified {
                if let index = self.idle.lastIndex(where: { $0 === helper }) { self.idle.remove(at: index) }
                return false
            }
        }
        return true
    }
}

/// One helper thread of a `BlockHelperPool`: what it parks on, and its first run.
///
/// Guards: `notified` is under the pool's mutex; `wakeup` is a condition on that mutex; `first` is written by the
/// spawner before `pthread_create` (which orders it before the thread's first instruction) and taken by the thread.
final class BlockHelper: SpawnedThreadEntry, @unchecked Sendable {
    let pool: BlockHelperPool
    let wakeup: SpindleCondition
    var notified = false  // protected by pool.mutex
    var first: BlockRun?

    fileprivate init(pool: BlockHelperPool, first: BlockRun) {
        self.pool = pool
        self.wakeup = SpindleCondition(sharing: pool.mutex)
        self.first = first
    }

    func runOnSpawnedThread() {
        guard let run = self.first else { return }
        self.first = nil
        self.pool.serve(self, first: run)
    }
}
