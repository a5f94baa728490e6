/// A bounded queue's admission: its capacity, what a full queue does, and the line of blocked producers. A unit of
/// the queue's locked state: a value stored in `QueueCore` and guarded by `QueueCore.lock` (with each waiter's
/// `outcome`). It decides and never acts: `grant` says which producers get in and which are refused, the core
/// admits their operations, and the semaphores are signalled after unlocking. `QueueCore.boundedHint` mirrors
/// `capacity != nil` for adding threads.
///
/// Fields: `capacity` (most members, barriers excluded, admitted and not finished; nil: unbounded), `policy`
/// (what an add to a full queue does), `producers` (blocked producers, oldest first; nil, never empty, when there
/// are none, so the finish path tests one field).
///
/// Rules: an add fits when its whole batch fits and no producer waits (so a new producer never overtakes a blocked
/// one: strict FIFO, no stolen room). Room is handed over, not raced for: whoever frees room calls `grant`, which
/// admits the oldest producers whose batches fit, in order, stopping at the first that does not.
/// A producer's states: see `ProducerWaiter` (waiting → granted | refused | withdrawn, each under the lock).
///
/// Invariants (`check()`): `producers` is nil or non-empty and every producer in it is `waiting`; `capacity` is nil
/// or at least 1.
struct Admission {
    private(set) var capacity: Int? = nil
    private(set) var policy: SpindleFullQueuePolicy = .block
    private(set) var producers: [ProducerWaiter]? = nil

    /// Whether any producer is blocked.
    @inline(__always)
    var hasProducers: Bool { self.producers != nil }

    /// Blocked producers and the operations they hold.
    var blockedCounts: (producers: Int, operations: Int) {
        guard let list = self.producers else { return (0, 0) }
        return (list.count, list.reduce(0) { $0 + $1.operations.count })
    }

    /// New settings (`policy` nil: unchanged). The caller then calls `grant(refusingOversized: true)`.
    mutating func set(capacity: Int?, policy: SpindleFullQueuePolicy?) {
        self.capacity = capacity
        if let policy { self.policy = policy }
    }

    /// What an add does now (see `decide`).
    enum AddDecision {
        /// The batch fits: admit it.
        case admit
        /// Refused with this error; nothing is added.
        case refuse(SpindleError)
        /// The queue is full and its policy is `.callerRuns`: the caller runs the batch itself.
        case runOnCaller
        /// The queue is full and the add blocks: a producer joins the line (`enqueue`).
        case wait
    }

    /// Decides an add of `count` operations with `counted` members counted against the capacity: a batch larger
    /// than the capacity is refused whatever the policy; one that fits is admitted; otherwise `policy` (nil: the
    /// queue's) says: refuse, run on the caller if `canRunOnCaller()`, or wait if `mayWait()` (else the caller
    /// would wait for room it holds itself: `waitOnOwnQueue`). The two questions are asked only when needed.
    func decide(count: Int, counted: Int, policy: SpindleFullQueuePolicy?, queueName: String,
                canRunOnCaller: () -> Bool, mayWait: () -> Bool) -> AddDecision {
        if let capacity = self.capacity, count > capacity {
            return .refuse(.batchExceedsCapacity(name: queueName, count: count, capacity: capacity))
        }
        if self.fits(count, counted: counted) { return .admit }
        switch policy ?? self.policy {
        case .reject:
            return .refuse(.queueFull(name: queueName, capacity: self.capacity ?? 0))
        case .callerRuns:
            return canRunOnCaller() ? .runOnCaller : .refuse(.queueFull(name: queueName, capacity: self.capacity ?? 0))
        case .block:
            return mayWait() ? .wait : .refuse(.waitOnOwnQueue(name: queueName))
        }
    }

    /// Whether `decide` would refuse an add of `count` gated operations now, whatever else happens: a batch larger
    /// than the capacity, or one that does not fit while the policy neither waits (`.block` where `mayWait()`) nor
    /// could run it on the caller (only a queue runs a gated operation).
    func refusesAtOnce(count: Int, counted: Int, policy: SpindleFullQueuePolicy?, mayWait: () -> Bool) -> Bool {
        if let capacity = self.capacity, count > capacity { return true }
        if self.fits(count, counted: counted) { return false }
        return (policy ?? self.policy) != .block || !mayWait()
    }

    /// Whether `count` more operations may be admitted now, with `counted` members counted against the capacity.
    func fits(_ count: Int, counted: Int) -> Bool {
        guard let capacity = self.capacity else { return true }
        return self.producers == nil && counted + count <= capacity
    }

    /// A producer starts waiting, behind every producer already waiting.
    mutating func enqueue(_ waiter: ProducerWaiter) {
        self.producers = (self.producers ?? []) + [waiter]
    }

    /// A producer still waiting gives up (deadline or task cancellation): out of the line, `withdrawn`.
    mutating func withdraw(_ waiter: ProducerWaiter) {
        waiter.outcome = .withdrawn
        guard var list = self.producers, let index = list.firstIndex(where: { $0 === waiter }) else { return }
        list.remove(at: index)
        self.producers = list.isEmpty ? nil : list
    }

    /// Room may have been made (`counted` members now): decides which blocked producers get in, oldest first while
    /// the oldest one's batch fits, and, with `refusingOversized` (after the capacity changed), first refuses out
    /// of turn any whose batch can no longer fit at all. Marks their outcomes and takes them out of the line.
    /// Returns the granted ones (whose operations the caller admits, in order) and the semaphores to signal after
    /// unlocking (granted and refused). O(1) when the oldest producer does not fit.
    mutating func grant(counted: Int, refusingOversized: Bool, queueName: String) -> (
        granted: [ProducerWaiter], signals: [SpindleSemaphore]?
    ) {
        guard var list = self.producers else { return ([], nil) }
        var signals: [SpindleSemaphore] = []
        if refusingOversized, let capacity = self.capacity {
            list.removeAll { waiter in
                let n = waiter.operations.count
                guard n > capacity else { return false }
                waiter.outcome = .refused(.batchExceedsCapacity(name: queueName, count: n, capacity: capacity))
                signals.append(waiter.semaphore)
                return true
            }
        }
        var admitted = counted
        var granted = 0
        for waiter in list {
            if let capacity = self.capacity, admitted + waiter.operations.count > capacity {
                break  // strict FIFO: nobody behind it goes first
            }
            admitted += waiter.operations.count
            waiter.outcome = .granted
            signals.append(waiter.semaphore)
            granted += 1
        }
        if granted == 0 && signals.isEmpty { return ([], nil) }  // nobody moved: leave the line as it is (no copy)
        let grantedWaiters = Array(list.prefix(granted))
        list.removeFirst(granted)
        self.producers = list.isEmpty ? nil : list
        return (grantedWaiters, signals.isEmpty ? nil : signals)
    }

    /// The queue was shut down: every blocked producer is refused with `error` and leaves the line. Returns their
    /// semaphores, to signal after unlocking (nil: nobody waited).
    mutating func refuseAll(_ error: SpindleError) -> [SpindleSemaphore]? {
        guard let list = self.producers else { return nil }
        self.producers = nil
        for waiter in list { waiter.outcome = .refused(error) }
        return list.map(\.semaphore)
    }

    func check() -> Bool {
        if let capacity = self.capacity, capacity < 1 { return false }
        guard let list = self.producers else { return true }
        return !list.isEmpty && list.allSatisfy { if case .waiting = $0.outcome { true } else { false } }
    }
}
