/// A producer blocked on a full queue, with the operations it is adding (already claimed for the queue:
/// `enqueued`, their `queue` set, not members).
///
/// State machine, every transition under the queue's `lock`:
/// - `waiting`: in `Admission.producers` (FIFO);
/// - `granted` (terminal): whoever made room (a finishing member, a capacity change, a producer giving up ahead
///   of it) admitted its operations and took it out of the list; the semaphore is signalled after unlocking;
/// - `refused` (terminal): the capacity was lowered below its batch's size, or the queue was shut down; taken out
///   of the list, semaphore signalled; the producer unclaims its operations and throws;
/// - `withdrawn` (terminal): its deadline passed or its task was cancelled while still `waiting`; the producer
///   took itself out of the list, unclaims its operations and throws.
/// Grant and withdrawal are decided under the same lock, so exactly one happens: a producer whose wait timed out
/// but who finds itself granted returns normally (its operations are in the queue).
final class ProducerWaiter: @unchecked Sendable {
    enum Outcome { case waiting, granted, refused(SpindleError), withdrawn }

    let operations: [SpindleOperation]
    let semaphore = try! SpindleSemaphore(value: 0)  // 0 is a valid value
    @exclusivity(unchecked) var outcome = Outcome.waiting

    init(_ operations: [SpindleOperation]) { self.operations = operations }
}

/// Bounded queues and the statistics behind `snapshot()`: the queue-side half (under `lock`).
///
/// Capacity counts members that are not barriers (`members.countedByCapacity`): operations added and not yet
/// finished, running ones included. The decisions (what fits, who is granted, refused or withdrawn) are the
/// `Admission` unit's. The thread that frees room (`unlinkFinishedLocked`, `capacityChanged`, a producer
/// withdrawing) admits the granted producers' operations itself, oldest producer first, and signals them after
/// unlocking. So there is no lost wakeup (the grant is recorded under the lock before the signal) and no stolen
/// one (nobody else can take room that was granted).
extension QueueCore {
    /// Members that count against the capacity. Caller holds `lock`.
    var countedMembersLocked: Int { self.members.countedByCapacity }

    /// Updates the members' high-water mark; called after admissions. Caller holds `lock`.
    @inline(__always)
    func noteMembersLocked() {
        let n = self.members.countedByCapacity
        self.stats.noteMembers(n)
    }

    /// Stamps an operation's admission time, for `recordWaitLocked`. Caller holds `lock`.
    @inline(never)
    func stampAdmissionLocked(_ op: SpindleOperation) {
        let now = SpindleDeadline.now.uptimeNanoseconds
        let extras = op.withLocked { $0.more }
        extras.admittedAt = now
        op.isTimed = true
    }

    /// An operation stamped at admission is being dispatched: record how long it waited. Caller holds `lock`.
    @inline(never)
    func recordWaitLocked(_ op: SpindleOperation) {
        let now = SpindleDeadline.now.uptimeNanoseconds
        let extras = op.withLocked { $0.more }
        let waited = now > extras.admittedAt ? now - extras.admittedAt : 0
        extras.admittedAt = 0
        op.isTimed = false
        self.stats.recordWait(waited)
    }

    /// Whether `count` more operations may be admitted now. Caller holds `lock`.
    func fitsLocked(_ count: Int) -> Bool { self.admission.fits(count, counted: self.countedMembersLocked) }

    /// Admits claimed operations (all linked before any is scheduled, as `addOperations` does). Caller holds `lock`.
    func admitBatchLocked(_ operations: [SpindleOperation]) {
        for op in operations { self.admitLocked(Unmanaged.passRetained(op)) }  // the queue's references
        for op in operations { self.scheduleAdmittedLocked(Unmanaged.passUnretained(op)) }
        self.noteMembersLocked()
    }

    /// Serves blocked producers in order while the oldest one's batch fits (see `Admission.grant`), admitting their
    /// operations. Returns the semaphores to signal after unlocking. Caller holds `lock`.
    @inline(never)
    func grantProducersLocked(refusingOversized: Bool = false) -> [SpindleSemaphore]? {
        let (granted, signals) = self.admission.grant(
            counted: self.countedMembersLocked, refusingOversized: refusingOversized, queueName: self.name)
        for waiter in granted { self.admitBatchLocked(waiter.operations) }
        return signals
    }
}
