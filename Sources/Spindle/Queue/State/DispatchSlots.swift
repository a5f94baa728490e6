/// The queue's slots: how many operations may run at once (the width), how many hold a slot now, and whether
/// dispatching is suspended. A unit of the queue's locked state: a value stored in `QueueCore`, guarded by
/// `QueueCore.lock`; it decides and never acts.
///
/// Fields (all under `QueueCore.lock`): `running`, operations dispatched and not finished (a concurrent operation
/// keeps its slot until it finishes; a worker's reserved batch shares its one slot); `limit`, the width in force
/// (`requestedLimit` resolved: the default sentinel means the CPU count); `requestedLimit`, as set by the user;
/// `suspended`; `heldByBatchWaiters`, operations of this queue blocked in `addOperations(_:waitUntilFinished: true)`
/// into this same queue (each holds its slot while it waits).
///
/// Invariants (`check()`): `running >= 0`, `limit >= 0`, `0 <= heldByBatchWaiters <= running`. `running` may exceed `limit` after the width is lowered
/// (running operations are never stopped); nothing more is dispatched until it is below again.
/// No state machine beyond the counts: `take` (a dispatch) and `free` (a finish) move `running`; the user's
/// setters move the rest.
struct DispatchSlots {
    private(set) var running = 0
    private(set) var limit: Int
    private(set) var requestedLimit: Int
    private(set) var suspended = false
    private(set) var heldByBatchWaiters = 0

    init(requested: Int, resolved: Int) {
        self.requestedLimit = requested
        self.limit = resolved
    }

    /// Whether a slot is free for dispatching now (width not reached, not suspended).
    @inline(__always)
    var hasFreeSlot: Bool { self.running < self.limit && !self.suspended }

    /// Whether one of `ready` ready operations may start now.
    @inline(__always)
    func canDispatch(ready: Int) -> Bool { ready > 0 && self.hasFreeSlot }

    /// How many of `ready` ready operations may start now.
    func room(ready: Int) -> Int { self.suspended ? 0 : max(0, min(ready, self.limit - self.running)) }

    /// An operation takes a slot; returns the slots in use now.
    @inline(__always)
    mutating func take() -> Int {
        self.running += 1
        return self.running
    }

    /// An operation that held a slot finished.
    @inline(__always)
    mutating func free() {
        self.running -= 1
    }

    /// A new width: `requested` as the user gave it, `resolved` as it applies.
    mutating func setWidth(requested: Int, resolved: Int) {
        self.requestedLimit = requested
        self.limit = resolved
    }

    mutating func setSuspended(_ suspended: Bool) { self.suspended = suspended }

    /// A thread working in `count` slots of this queue wants to block them until a batch it adds here finishes.
    /// Refused (false) when every slot would then be held by such waiters: nothing could run the batch, a
    /// deadlock. Otherwise counts the slots. (A width lowered later, or a suspension, can still stall such a wait,
    /// as it stalls any wait on a queue that does not run.)
    mutating func beginBatchWait(count: Int = 1) -> Bool {
        guard self.heldByBatchWaiters + count < self.limit else { return false }
        self.heldByBatchWaiters += count
        return true
    }

    /// A waiter counted by `beginBatchWait` stopped waiting.
    mutating func endBatchWait() { self.heldByBatchWaiters -= 1 }

    /// The invariants above.
    func check() -> Bool {
        self.running >= 0 && self.limit >= 0 && self.heldByBatchWaiters >= 0 && self.heldByBatchWaiters <= self.running
    }
}
