import CShim

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
/// never finish theirs (NSOperationQueue's contract), as soon as a thread can be created. If the timer thread
/// itself cannot start, the retry is dropped and `retryPending` cleared, so the queue's next event tries again.
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
        let thread: SpindleThread
        do {
            thread = try SpindleThread.spawnJoinable(name: "spindle.w\(index)") { [self] in self.workerLoop() }
        } catch {
            self.threadFailedToStart(error)
            return
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
            SpindleDiagnostics.report(.workerSpawnRecovered(queue: self.name, failures: recoveredFrom))
        }
    }

    /// The failure path (see the type's notes).
    private func threadFailedToStart(_ error: SpindleError) {
        let (after, delay) = self.spawnFailed()
        self.perform(after)
        let timerFailure = DeadlineTimer.shared.insert(SpawnRetry(core: self, after: delay))
        if timerFailure != 0 {
            self.lock.withLock {
                self.idle.retryNotScheduled()
                self.publishIdleLocked()
            }
            SpindleDiagnostics.report(.deadlineTimerFailedToStart(errno: timerFailure))
        }
        var errno: Int32 = -1
        if case .system(_, let code) = error { errno = code }
        SpindleDiagnostics.report(.workerSpawnFailed(queue: self.name, errno: errno, retryNanoseconds: delay))
    }

    /// The timer's retry: admit the inbox and start whatever can start now (on the timer thread).
    func retrySpawn() {
        self.perform(self.spawnRetried())
    }
}
