/// Members that wait for a batch they add to their own queue (`addOperations(_:waitUntilFinished: true)` from an
/// operation running on it): counted in `DispatchSlots.heldByBatchWaiters`, so a wait that could never end is
/// refused instead of hanging.
extension QueueCore {
    /// A member asks to hold its slot while it waits for a batch it adds to this queue (see
    /// `DispatchSlots.beginBatchWait`). Caller holds no lock.
    func beginBatchWait() -> Bool { self.lock.withLock { self.slots.beginBatchWait() } }

    /// The member's batch wait ended. Caller holds no lock.
    func endBatchWait() { self.lock.withLock { self.slots.endBatchWait() } }
}
