/// The identities that tie the units of the queue's locked state together, checked in debug builds wherever a
/// locked section begins (`drainInboxLocked`), so every event's end state is checked by the next one, in the
/// threaded tests and the stress pass alike. Compiled out at `-O` (`assert`).
extension QueueCore {
    /// Each unit's own invariants, and across units:
    /// - members = released non-barrier members + held members + the running barrier (`BarrierGate`);
    /// - no members ⇒ nothing in the ready buckets;
    /// - a queue served by a run loop or a pool has no threads of its own, and only a run-loop-served one has a
///   pending perform;
    /// - a terminated queue has no members and no worker in its loop or being started.
    /// Caller holds `lock`.
    func checkInvariantsLocked() -> Bool {
        self.idle.check() && self.slots.check() && self.stats.check() && self.barriers.check() && self.members.check()
            && self.asyncDrainWaiters.check() && self.terminationWaiters.check() && self.admission.check()
            && (!self.lifecycle.isTerminated || (self.members.count == 0 && self.idle.noWorkers))
            && self.members.count
                == self.barriers.activeUnfinished + self.barriers.heldCount + (self.barriers.barrierActive ? 1 : 0)
            && (self.members.count > 0 || self.ready.count == 0)
            && (self.servingRunLoop != nil || !self.idle.performPending)
    }
}
