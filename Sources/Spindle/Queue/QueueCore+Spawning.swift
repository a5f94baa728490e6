import CShim
import Glibc

/// Starting worker threads, and what happens when the process is out of them.
///
/// `IdleWorkers.wakeOrSpawn` reserves a place (`starting`) and the caller starts the thread after unlocking
/// (`spawnWorker`). While that place is reserved, adding threads see "no thread may be added" in `IdleHints` and
/// take no lock: their operations wait in the inbox for a worker. If the start fails, nobody may be coming for
/// them, so the failure path, under the lock:
/// 1. frees the place and sets `retryPending` (`IdleWorkers.threadFailedToStart`, which also gives the backoff);
/// 2. admits the inbox (the operations added meanwhile);
/// 3. decides wakes for whatever can start now: parked workers take it (no thread is started while the retry is
///    pending);
/// then, unlocked: sends those signals, schedules a `SpawnRetry` on the process timer after the backoff (1 ms,
/// doubling with each failure in a row, at most 1 s), and reports `.workerSpawnFailed`. The retry admits the
/// inbox and decides again, starting threads. So a free slot runs a ready operation even when the other workers
/// never finish theirs (NSOperationQueue's contract), as soon as a thread can be created.
///
/// If the timer thread itself cannot start (the process's first timer entry came while it was out of threads),
/// the retry is taken back out of the timer (it would fire late, on top of whoever runs it) and
/// `IdleWorkers.timerRefusedRetry` decides who runs it:
/// - the thread whose start failed is not one of this queue's workers (an adding thread, the termination wait),
///   or no worker of this queue is in its loop (nothing else would come for the work: a fresh queue whose adds
///   are done would wait for ever), and the backoff is below its 1 s cap: that thread runs it (`retryInPlace`):
///   with `retryPending` still set, it waits out the backoff, runs the retry's event (`spawnRetried`), then starts
///   the threads that event reserved, in a loop, until a start succeeds, the timer takes a retry, or the cap is
///   reached. The caller of the add (or the termination wait) is held for that time, about 1 s at most
///   (1 + 2 + … + 512 ms). The workers may all be busy for ever (an operation waiting for the one being added), so
///   an adding thread does not leave the retry to them;
/// - otherwise nobody: `retryPending` is cleared and a worker comes back for the work by itself, or the queue's
///   next event starts a thread. A worker must not sleep here: it may hold an operation it has taken and not yet
///   run (so the work may wait if every other worker is busy for ever: the one case left, see
///   `Models/queue-workers.pml`); past the cap the process is taken to be out of threads for good, and no caller
///   is held longer.
/// (Before, the retry was always dropped: the fault pass stranded a fresh queue's operations that way; then it
/// was run in place only when the queue had no worker: an add while every worker waited for it stranded it.)
extension QueueCore {
    /// A scheduled retry of a failed thread start (an entry of the process timer). Holds the core strongly until
    /// it fires (at most 1 s after a failure); a core shut down meanwhile starts nothing.
    final class SpawnRetry: TimerEntry, @unchecked Sendable {
        let core: QueueCore

        init(core: QueueCore, after delay: UInt64) {
            self.core = core
            super.init(deadline: cshim_clock_monotonic_ns() &+ delay)
        }

        override func fire() { self.core.retrySpawn() }
    }

    /// Starts the worker for a place reserved by `.spawn(index)`. Caller holds no lock.
    func spawnWorker(_ index: Int) {
        if let delay = self.startWorker(index) { self.retryInPlace(after: delay) }
    }

    /// Starts the worker for a reserved place. Returns nil if it started or the failure's retry is on the timer;
    /// else the backoff after which this thread must run the retry itself (the timer's thread could not start).
    private func startWorker(_ index: Int) -> UInt64? {
        let thread: SpindleThread
        do {
            thread = try SpindleThread.spawnJoinable(name: "spindle.w\(index)") { [self] in self.workerLoop() }
        } catch {
            return self.threadFailedToStart(error)
        }
        var after = AfterUnlock()
        self.lock.lock()
        let recoveredFrom = self.idle.threadStarted(thread)
        self.publishIdleLocked()
        self.terminateIfDoneLocked(&after)  // it may have left its loop already, on a stopping queue
        // The handle was released while this thread was being created, and its threads were joined without it.
        let late = self.lifecycle.threadsCollected ? self.idle.takeThreads() : []
        self.lock.unlock()
        self.perform(&after)
        QueueCore.join(late)
        if recoveredFrom > 0 {
            let name = self.lock.withLock { self.name }  // under the lock: a rename may race this report
            SpindleDiagnostics.report(.workerSpawnRecovered(queue: name, failures: recoveredFrom))
        }
        return nil
    }

    /// The failure path (see the type's notes). Returns nil when the timer took the retry, else its backoff: the
    /// caller runs the retry (`retrySpawn`'s event) itself after it.
    private func threadFailedToStart(_ error: SpindleError) -> UInt64? {
        let (after, delay) = self.spawnFailed()
        self.perform(after)
        var errno: Int32 = -1
        if case .system(_, let code) = error { errno = code }
        let name = self.lock.withLock { self.name }  // under the lock: a rename may race this report
        SpindleDiagnostics.report(.workerSpawnFailed(queue: name, errno: errno, retryNanoseconds: delay))
        let retry = SpawnRetry(core: self, after: delay)
        let timerFailure = DeadlineTimer.shared.insert(retry)
        guard timerFailure != 0 else { return nil }
        DeadlineTimer.shared.remove(retry)  // else it waits in the heap and fires whenever the timer starts
        let callerIsWorker = ThreadContext.withCurrent { $0.workerOf === self }
        let inPlace = self.lock.withLock {
            let inPlace = self.idle.timerRefusedRetry(
                delay: delay, shuttingDown: self.shuttingDown, callerIsWorker: callerIsWorker)
            self.publishIdleLocked()  // not in place: threads may start again
            return inPlace
        }
        SpindleDiagnostics.report(.deadlineTimerFailedToStart(errno: timerFailure))
        return inPlace ? delay : nil
    }

    /// Runs the retry on this thread, the timer's thread having failed to start (see the type's notes): after the
    /// backoff, the retry's event, then the starts it decided, here (a loop, not a recursion). Every place the
    /// event reserved is started or freed before the next backoff.
    private func retryInPlace(after firstDelay: UInt64) {
        var delay = firstDelay
        while true {
            QueueCore.pause(nanoseconds: delay)
            var after = self.spawnRetried()
            let places = after.wake.takeSpawns()
            self.perform(&after)  // its signals and releases; the starts are ours
            var failedAgain: UInt64? = nil
            for index in places {
                if let next = self.startWorker(index) { failedAgain = next }
            }
            guard let next = failedAgain else { return }
            delay = next
        }
    }

    /// Waits `nanoseconds` on this thread (the in-place retry's backoff, here and in `PoolCore`), through
    /// interruptions.
    static func pause(nanoseconds: UInt64) {
        var pause = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        var remaining = timespec()
        while nanosleep(&pause, &remaining) != 0 && errno == EINTR { pause = remaining }
    }

    /// The timer's retry: admit the inbox and start whatever can start now (on the timer thread).
    func retrySpawn() {
        self.perform(self.spawnRetried())
    }
}
