/// What a queue event decided under the lock and leaves to do once the lock is released: one value, filled by the
/// event's steps (see `QueueCore+Events`), run by `QueueCore.perform(_:)` in the order of its fields. A plain value
/// owned by the thread that holds it; it decides nothing and allocates nothing unless semaphores are collected.
///
/// The order is the rule of every path (wake first, references and `outstanding` last):
/// 1. `wake`: unpark the chosen workers, start threads, schedule a perform on the serving run loop, so the next
///    operation starts as early as possible;
/// 2. `finished`: operations whose queue bookkeeping is done on a worker (a chain through `nextLink`): release their
///    waiters, then drop the queue's reference to each;
/// 3. `semaphores`: async drain waiters and blocked producers whose outcome was decided (their tasks may add work
///    to this queue, so never under the lock);
/// 4. `dropped`: a reference the queue owned (the member list, or a worker whose operation was unlinked elsewhere);
/// 5. `outstandingDrops`: operations through, taken off `outstanding`, last, because the last one releases the
///    handle, which may free the queue.
///
/// Dropping a reference may free user objects and run their deinitialisers, and signalling may run user code: both
/// happen only in `perform`, never under the lock.
struct AfterUnlock {
    var wake = IdleWorkers.WakePlan()
    private(set) var finished: Unmanaged<SpindleOperation>? = nil
    private var finishedTail: Unmanaged<SpindleOperation>? = nil
    private(set) var semaphores: [SpindleSemaphore]? = nil
    var dropped: Unmanaged<SpindleOperation>? = nil
    var outstandingDrops = 0

    /// Whether steps 2 to 4 have nothing to do.
    @inline(__always)
    var hasNoReleases: Bool { self.finished == nil && self.semaphores == nil && self.dropped == nil }

    /// Appends a finished operation (whose queue reference the holder owns) to step 2.
    @inline(__always)
    mutating func addFinished(_ op: Unmanaged<SpindleOperation>) {
        op._withUnsafeGuaranteedRef { $0.nextLink = nil }
        if let tail = self.finishedTail { tail._withUnsafeGuaranteedRef { $0.nextLink = op } } else { self.finished = op }
        self.finishedTail = op
    }

    /// Adds semaphores to step 3 (nil: nothing).
    @inline(__always)
    mutating func addSemaphores(_ more: [SpindleSemaphore]?) {
        guard let more else { return }
        if let existing = self.semaphores { self.semaphores = existing + more } else { self.semaphores = more }
    }

    /// Takes steps 2 to 4 out of this value (the performer then owns them), leaving `wake` and `outstandingDrops`.
    @inline(__always)
    mutating func takeReleases() -> (
        finished: Unmanaged<SpindleOperation>?, semaphores: [SpindleSemaphore]?, dropped: Unmanaged<SpindleOperation>?
    ) {
        defer {
            self.finished = nil
            self.finishedTail = nil
            self.semaphores = nil
            self.dropped = nil
        }
        return (self.finished, self.semaphores, self.dropped)
    }
}
