/// The whole observable state of an operation, packed in one 64-bit word so every read is one atomic load and
/// every transition one compare-and-swap (Lea's `ctl`, corelibs' ordered state).
///
/// Layout:
/// - bits 0–3: `Lifecycle` (ordered: "at least finishing" is a `>=` test);
/// - bit 4: cancelled; bit 5: scheduled (the owning queue has put it in a ready bucket, or is about to);
/// - bit 6: settled (the finish path is complete: completion block returned, dependents and queue told);
/// - bit 7: failed (it finished with an error: `main` threw or `finish(throwing:)`; set with `finished`);
/// - bit 8: propagates failure (`cancelsOnFailedDependency`: a failed or cancelled dependency cancels it);
/// - bit 9: gated (it has conditions or exclusivity categories; set while `idle`, never cleared);
/// - bit 10: gate hold (its gate holds it back: one of the pending dependencies is the gate's, added when it was
///   enqueued, released when the gate opens);
/// - bit 11: gate armed (the adding thread has added what its conditions produced: the decrement that leaves the
///   gate's hold alone clears this bit and opens the gate, so exactly one thread does);
/// - bit 12: gate opened (set in the compare-and-swap that decides to open it; never cleared): from then on a new
///   dependency is listed but does not hold the operation back, as once it is scheduled, so an operation never
///   holds its exclusivity categories while it waits for a dependency added late;
/// - bits 32–63: unfinished dependencies that hold the operation back.
///
/// Lifecycle (forward only, never skipping back):
/// - `idle`: created, in no queue. → `enqueued` (added to a queue), → `executing` (`start()` by hand, when
///   ready), → `finishing` (`start()` by hand on a cancelled operation).
/// - `enqueued`: owned by a queue, waiting. → `dispatching` (a worker took it from a ready bucket).
/// - `dispatching`: a worker is about to call `start()`. → `executing`, or → `finishing` if cancelled; only by
///   that `start()` (`queueCalledStart`, set just before the queue calls it; its code may move to another thread):
///   a `start()` before that throws `operationEnqueued`. (A group cancelled before it ran stays here until its
///   children are through; its own finish path then moves it on.)
/// - `executing`: `main` runs (or a concurrent operation has not reported its end). → `finishing`.
/// - `finishing`: `isExecuting` already false, `isFinished` not yet true. → `finished` (under the op's lock).
/// - `finished`: terminal. `settled` is set once everything that follows finishing has happened.
///
/// Readiness is derived, never stored: ready = cancelled || pendingDependencies == 0.
///
/// The gate (a gated operation only, see `SpindleOperation+Conditions`): enqueuing adds the hold (bit 10 and one
/// pending); the adding thread then arms it (bit 11) if real dependencies are pending, or opens it at once; the
/// dependency decrement that leaves the hold alone disarms and opens it; opening ends by releasing the hold (bit 10
/// and one pending). A failed batch add gives the hold back with the operation (`dequeuingUnadmitted`).
struct OperationState: Equatable, Sendable, CustomStringConvertible {
    enum Lifecycle: UInt64, Comparable, Sendable {
        case idle = 0, enqueued = 1, dispatching = 2, executing = 3, finishing = 4, finished = 5
        static func < (a: Lifecycle, b: Lifecycle) -> Bool { a.rawValue < b.rawValue }
    }

    static let lifecycleMask: UInt64 = 0xF
    static let cancelledBit: UInt64 = 1 << 4
    static let scheduledBit: UInt64 = 1 << 5
    static let settledBit: UInt64 = 1 << 6
    static let failedBit: UInt64 = 1 << 7
    static let propagatesFailureBit: UInt64 = 1 << 8
    static let gatedBit: UInt64 = 1 << 9
    static let gateHoldBit: UInt64 = 1 << 10
    static let gateArmedBit: UInt64 = 1 << 11
    static let gateOpenedBit: UInt64 = 1 << 12
    static let pendingShift: UInt64 = 32
    static let pendingOne: UInt64 = 1 << 32

    var raw: UInt64

    init(raw: UInt64) { self.raw = raw }
    static let initial = OperationState(raw: 0)

    var lifecycle: Lifecycle {
        get { Lifecycle(rawValue: self.raw & Self.lifecycleMask)! }
        set { self.raw = (self.raw & ~Self.lifecycleMask) | newValue.rawValue }
    }
    var isCancelled: Bool { self.raw & Self.cancelledBit != 0 }
    var isScheduled: Bool { self.raw & Self.scheduledBit != 0 }
    var isSettled: Bool { self.raw & Self.settledBit != 0 }
    var isFailed: Bool { self.raw & Self.failedBit != 0 }
    var propagatesFailure: Bool { self.raw & Self.propagatesFailureBit != 0 }
    var isGated: Bool { self.raw & Self.gatedBit != 0 }
    var hasGateHold: Bool { self.raw & Self.gateHoldBit != 0 }
    var isGateArmed: Bool { self.raw & Self.gateArmedBit != 0 }
    var isGateOpened: Bool { self.raw & Self.gateOpenedBit != 0 }
    var pendingDependencies: Int { Int(self.raw >> Self.pendingShift) }
    var isReady: Bool { self.isCancelled || self.pendingDependencies == 0 }

    // MARK: - Pure transitions: each returns the new state, or nil when the transition is not allowed.

    /// `start()` by hand (from `idle`) or by a worker (from `dispatching`), when ready and not cancelled.
    func beginningExecution() -> OperationState? {
        guard self.lifecycle == .idle || self.lifecycle == .dispatching, self.isReady, !self.isCancelled else {
            return nil
        }
        var next = self
        next.lifecycle = .executing
        return next
    }

    /// Into `finishing`: from `executing`, or from a not-yet-executing state when cancelled (finish unrun).
    func beginningFinish() -> OperationState? {
        switch self.lifecycle {
        case .executing: break
        case .idle, .dispatching: guard self.isCancelled else { return nil }
        case .enqueued, .finishing, .finished: return nil
        }
        var next = self
        next.lifecycle = .finishing
        return next
    }

    /// `finishing` → `finished`.
    func finished() -> OperationState? {
        guard self.lifecycle == .finishing else { return nil }
        var next = self
        next.lifecycle = .finished
        return next
    }

    /// `cancel()`: sets the bit unless finishing or finished (no effect then, nor when already cancelled).
    func cancelling() -> OperationState? {
        guard self.lifecycle < .finishing, !self.isCancelled else { return nil }
        return OperationState(raw: self.raw | Self.cancelledBit)
    }

    /// Adding to a queue: `idle` → `enqueued`; a gated operation also takes its gate's hold (one pending).
    func enqueuing() -> OperationState? {
        guard self.lifecycle == .idle else { return nil }
        var next = self
        next.lifecycle = .enqueued
        if self.isGated { next.raw = (next.raw | Self.gateHoldBit) &+ Self.pendingOne }
        return next
    }

    /// Undoing `enqueuing` when a batch add fails part-way: `enqueued` → `idle`. The operation was never admitted
    /// to the queue, so never pushed to a bucket; a `scheduled` bit set meanwhile (a concurrent cancel) is cleared,
    /// and the queue ignores that operation's pending schedule request (`QueueCore.pushLocked`).
    /// The gate's hold, taken by `enqueuing`, is given back too (the gate was never armed: that happens only after
    /// a successful add).
    func dequeuingUnadmitted() -> OperationState? {
        guard self.lifecycle == .enqueued else { return nil }
        var next = OperationState(raw: self.raw & ~Self.scheduledBit)
        next.lifecycle = .idle
        if self.hasGateHold { next.raw = (next.raw & ~(Self.gateHoldBit | Self.gateArmedBit)) &- Self.pendingOne }
        return next
    }

    /// The queue claims a ready, enqueued operation for its ready buckets (exactly once).
    func scheduling() -> OperationState? {
        guard self.lifecycle == .enqueued, self.isReady, !self.isScheduled else { return nil }
        return OperationState(raw: self.raw | Self.scheduledBit)
    }

    /// A worker takes it from a bucket: `enqueued` → `dispatching`.
    func dispatching() -> OperationState? {
        guard self.lifecycle == .enqueued, self.isScheduled else { return nil }
        var next = self
        next.lifecycle = .dispatching
        return next
    }

    /// One more unfinished dependency: only before a worker or `start()` took it, and not once scheduled (one
    /// scheduled is held back by `unschedulingAddingPendingDependency`, with its queue's lock).
    func addingPendingDependency() -> OperationState? {
        guard self.lifecycle <= .enqueued, !self.isScheduled, !self.isGateOpened else { return nil }
        return OperationState(raw: self.raw &+ Self.pendingOne)
    }

    /// One more unfinished dependency for an operation its queue found ready (`scheduled`, waiting in a bucket)
    /// that no worker has taken: back to waiting, `scheduled` cleared (its queue takes it out of the bucket under its
    /// lock, `QueueCore.holdBackReady`). Not for a cancelled one (ready whatever it waits for) or a gated one.
    func unschedulingAddingPendingDependency() -> OperationState? {
        guard self.lifecycle == .enqueued, self.isScheduled, !self.isCancelled, !self.isGated else { return nil }
        return OperationState(raw: (self.raw & ~Self.scheduledBit) &+ Self.pendingOne)
    }

    /// One dependency fewer (it finished, or was removed).
    func removingPendingDependency() -> OperationState {
        precondition(self.pendingDependencies > 0, "OperationState: pending dependency count underflow")
        return OperationState(raw: self.raw &- Self.pendingOne)
    }

    func settling() -> OperationState { OperationState(raw: self.raw | Self.settledBit) }

    // MARK: - The gate (gated operations only)

    /// `addCondition` / `addExclusivityCategory`: marks it gated, only while `idle`.
    func gating() -> OperationState? {
        guard self.lifecycle == .idle else { return nil }
        return OperationState(raw: self.raw | Self.gatedBit)
    }

    /// The adding thread arms the gate when real dependencies still hold it back (more pending than the hold) and
    /// it is enqueued and not cancelled; nil otherwise (the adding thread opens the gate itself).
    /// When that is not so, the same compare-and-swap marks it opened instead (a dependency added after this is not
    /// counted), and the adding thread opens it.
    func gateArmingOrOpening() -> OperationState? {
        guard self.hasGateHold, !self.isGateArmed, !self.isGateOpened else { return nil }
        if self.lifecycle == .enqueued, !self.isCancelled, self.pendingDependencies > 1 {
            return OperationState(raw: self.raw | Self.gateArmedBit)
        }
        return OperationState(raw: self.raw | Self.gateOpenedBit)
    }

    /// Applied to the result of `removingPendingDependency`: when the gate is armed and only its hold is left,
    /// the same state disarmed (the thread whose compare-and-swap stores it opens the gate); else nil.
    func gateOpening() -> OperationState? {
        guard self.raw & Self.gateArmedBit != 0, self.pendingDependencies == 1 else { return nil }
        return OperationState(raw: (self.raw & ~Self.gateArmedBit) | Self.gateOpenedBit)
    }

    /// The gate opened (or gave up on a cancelled operation): its hold is released.
    func releasingGateHold() -> OperationState? {
        guard self.hasGateHold else { return nil }
        return OperationState(raw: (self.raw & ~(Self.gateHoldBit | Self.gateArmedBit)) &- Self.pendingOne)
    }

    var description: String {
        "\(self.lifecycle)\(self.isCancelled ? "+cancelled" : "")\(self.isScheduled ? "+scheduled" : "")"
            + "\(self.isSettled ? "+settled" : "")\(self.isFailed ? "+failed" : "")"
            + "\(self.hasGateHold ? (self.isGateArmed ? "+gate(armed)" : "+gate") : "") pending=\(self.pendingDependencies)"
    }
}
