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
///
/// Retiring (a worker with work in hand, `QueueCore.perform(_:keepingDropsBelow:retiring:)`, while `keepsReferences`):
/// step 2 releases the finished operations' waiters at once but keeps their references in `retired` (chained through
/// `nextLink`); they are dropped when the worker runs out of work (before it spins or parks), before any
/// `outstanding` drop, when it exits, and when `retiredLimit` are kept. Freeing an operation (and its block's
/// captures) then comes after the backlog has started, not between its operations.
///
/// `keepsReferences` states: KEEPING (a worker woke from a park, or started: what it finds is a backlog that piled up
/// while it slept, a burst) → RELEASING (it dropped its kept references while busy: the limit or a drop batch; a
/// stream as long as that is served as before, each batch's references dropped before the next one runs) → KEEPING
/// (its next wakeup). Keeping is limited to those bursts because on a busy stream it does not pay: deferring the frees
/// there made 1,000,000 operations 5–9 % slower (BENCHMARKS.md, "A burst's frees").
struct AfterUnlock {
    /// The most finished operations a worker keeps before dropping them (about 7 KB of one-block operations): a burst
    /// of 64 starts before any of it is freed.
    static let retiredLimit = 64
    /// Whether a worker's `perform(retiring: true)` keeps references (see the states above); other holders never do.
    var keepsReferences = true
    var wake = IdleWorkers.WakePlan()
    private(set) var finished: Unmanaged<SpindleOperation>? = nil
    private var finishedTail: Unmanaged<SpindleOperation>? = nil
    private(set) var semaphores: [SpindleSemaphore]? = nil
    var dropped: Unmanaged<SpindleOperation>? = nil
    var outstandingDrops = 0
    /// Finished operations whose waiters were released and whose references are still to drop (see "Retiring").
    private(set) var retired: Unmanaged<SpindleOperation>? = nil
    private(set) var retiredCount = 0

    /// Whether steps 2 to 4 have nothing to do, retired references included.
    @inline(__always)
    var hasNoReleases: Bool {
        self.finished == nil && self.semaphores == nil && self.dropped == nil && self.retired == nil
    }

    /// Keeps the references of a chain of finished operations (their waiters released), `head` to `tail` through
    /// `nextLink`, `count` of them, until the retired ones are dropped.
    @inline(__always)
    mutating func retire(_ head: Unmanaged<SpindleOperation>, through tail: Unmanaged<SpindleOperation>, count: Int) {
        tail._withUnsafeGuaranteedRef { $0.nextLink = self.retired }
        self.retired = head
        self.retiredCount += count
    }

    /// Takes the retired references out of this value (the caller drops them).
    @inline(__always)
    mutating func takeRetired() -> Unmanaged<SpindleOperation>? {
        defer {
            self.retired = nil
            self.retiredCount = 0
        }
        return self.retired
    }

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

    /// Takes steps 2 to 4 out of this value (the performer then owns them), leaving `wake`, `outstandingDrops` and
    /// the retired references.
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
