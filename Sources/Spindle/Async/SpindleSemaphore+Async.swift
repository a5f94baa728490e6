/// The async wait of `SpindleSemaphore`: suspends the task (a continuation), never blocks a thread.
///
/// Each async wait that has to wait owns one `Waiter` node (`isAsync`), appended to the same FIFO as the blocking
/// waiters, so permits go oldest first whoever waits. Its state machine, every field under the semaphore's
/// `condition.mutex`:
///
/// - `queued` (¬granted, ¬cancelled, no continuation): in `parked`, the task has not suspended yet;
/// - `suspended` (continuation set): in `parked`, the task sleeps;
/// - `granted` (terminal): `signal` took the node out of the line (advanced `parkedHead` past it) and gave it the
///   permit; the continuation (if already set) is resumed normally outside the lock, or the task sees `granted`
///   when it comes to suspend;
/// - `cancelled` (terminal): the task's cancellation handler removed the node from the line before any grant
///   (`removeParkedLocked`, which also drops the served prefix when due); the continuation (if set) is resumed
///   with `CancellationError` outside the lock, or the task sees `cancelled` when it comes to suspend.
///
/// Async waiters never spin and never report to the semaphore's `spinPolicy` (a suspended task costs no thread).
///
/// Grant and cancellation are decided under the same lock, so exactly one of them wins and the continuation is
/// resumed exactly once. Decision for the race "granted the permit at the same moment it was cancelled": whichever
/// came first under the lock wins. A waiter granted first **keeps** its permit: `wait()` returns normally (the
/// task is cancelled and will see it at its next check; the permit is now the caller's, to use or `signal` back).
/// A waiter cancelled first throws and takes nothing; a later `signal` goes to the next waiter or becomes a free
/// permit. So `wait()` returns exactly when it took one permit and throws exactly when it took none: no permit is
/// ever lost or created by cancellation.
extension SpindleSemaphore {
    /// Takes a permit, suspending the calling task (not its thread) until one is available. Async waiters and
    /// blocking `wait` callers share one first-in, first-out line. Callable from any task.
    ///
    /// - Throws: `CancellationError` if the task is cancelled before it was granted a permit (at once, taking
    ///   nothing, if it was already cancelled when it called, even if a permit is free). A task cancelled after
    ///   the grant returns normally and owns the permit (see the type's notes above).
    public func wait() async throws {
        try Task.checkCancellation()
        self.condition.lock()
        if self.permits > 0 {
            self.takePermitLocked()
            self.condition.unlock()
            return
        }
        let me = Waiter(isAsync: true)
        self.parked.append(me)
        self.condition.unlock()
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
                self.condition.lock()
                if me.granted {
                    self.condition.unlock()
                    continuation.resume()
                } else if me.cancelled {
                    self.condition.unlock()
                    continuation.resume(throwing: CancellationError())
                } else {
                    me.continuation = continuation
                    self.condition.unlock()
                }
            }
        } onCancel: {
            self.condition.lock()
            guard !me.granted, !me.cancelled else {
                self.condition.unlock()
                return
            }
            me.cancelled = true
            self.removeParkedLocked(me)
            let continuation = me.continuation
            me.continuation = nil
            self.condition.unlock()
            continuation?.resume(throwing: CancellationError())
        }
    }

    /// Waiters in line right now, blocking and async (a snapshot, for tests and diagnostics).
    var waiterCount: Int { self.condition.withLock { self.parked.count - self.parkedHead } }
}
