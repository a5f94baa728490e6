/// Members that wait for a batch they add to their own queue (`addOperations(_:waitUntilFinished: true)` from an
/// operation running on it): counted in `DispatchSlots.heldByBatchWaiters`, so a wait that could never end is
/// refused instead of hanging. A slot is counted once, however many threads of its operation wait (the owner and
/// the helper threads of a block operation, the children of a group): `batchWaitsBySlot`, under `lock`, counts
/// the waiting threads per slot, keyed by the address of the member holding it (`slotHeldByCallingThread`).
extension QueueCore {
    /// A thread of the member keyed `slot` asks to hold that slot while it waits for a batch it adds to this queue
    /// (see `DispatchSlots.beginBatchWait`; a slot already held so is counted once). Caller holds no lock.
    func beginBatchWait(slot: UInt) -> Bool {
        self.lock.withLock {
            if let waiting = self.batchWaitsBySlot[slot] {
                self.batchWaitsBySlot[slot] = waiting + 1
                return true
            }
            guard self.slots.beginBatchWait() else { return false }
            self.batchWaitsBySlot[slot] = 1
            return true
        }
    }

    /// That thread's batch wait ended. Caller holds no lock.
    func endBatchWait(slot: UInt) {
        self.lock.withLock {
            let waiting = self.batchWaitsBySlot[slot, default: 1] - 1
            if waiting > 0 {
                self.batchWaitsBySlot[slot] = waiting
            } else {
                self.batchWaitsBySlot[slot] = nil
                self.slots.endBatchWait()
            }
        }
    }
}
