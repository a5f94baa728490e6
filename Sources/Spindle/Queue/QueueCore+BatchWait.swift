/// Members that wait for a batch they add to their own queue (`addOperations(_:waitUntilFinished: true)` from an
/// operation running on it): counted in `DispatchSlots.heldByBatchWaiters`, so a wait that could never end is
/// refused instead of hanging. A slot is counted once, however many threads of its operation wait (the owner and
/// the helper threads of a block operation, the children of a group), and a thread may hold two (a worker running
/// another member's completion block): `batchWaitsBySlot`, under `lock`, counts the waiting threads per slot, keyed
/// by the address of the member holding it (`SpindleOperationQueue.slotsHeldByCallingThread`).
///
/// States of a key: absent → counted (n > 0 waiters; the slot is in `heldByBatchWaiters`) → absent (its last
/// waiter left), or → released (n < 0: its member finished while |n| threads still wait, and its slot left
/// `heldByBatchWaiters` with it, `batchWaitSlotFreedLocked`) → absent (its last waiter left).
extension QueueCore {
    /// A thread holding `slots` asks to hold them while it waits for a batch it adds to this queue: refused when
    /// the slots not counted yet would leave none for the batch (`DispatchSlots.beginBatchWait`), or when a barrier
    /// is pending (the batch would be held behind it, and it waits for the caller; a bounded add checks only here,
    /// an unbounded one again when it admits the batch). Caller holds no lock.
    func beginBatchWait(slots: [UInt]) -> Bool {
        self.lock.withLock {
            if self.barriers.holdsAdds { return false }
            let new = slots.filter { self.batchWaitsBySlot[$0] == nil }
            if !new.isEmpty {
                guard self.slots.beginBatchWait(count: new.count) else { return false }
            }
            for slot in slots {
                let waiting = self.batchWaitsBySlot[slot, default: 0]
                self.batchWaitsBySlot[slot] = waiting >= 0 ? waiting + 1 : waiting - 1
            }
            return true
        }
    }

    /// That thread's batch wait ended. Caller holds no lock.
    func endBatchWait(slots: [UInt]) {
        self.lock.withLock {
            for slot in slots {
                guard let waiting = self.batchWaitsBySlot[slot] else { continue }
                let left = waiting > 0 ? waiting - 1 : waiting + 1
                if left != 0 {
                    self.batchWaitsBySlot[slot] = left
                } else {
                    self.batchWaitsBySlot[slot] = nil
                    if waiting > 0 { self.slots.endBatchWait() }
                }
            }
        }
    }

    /// `op`'s slot was freed (it finished) while threads may still count it in a batch wait (a concurrent
    /// operation finished from a callback while its own thread waits): the slot leaves `heldByBatchWaiters` now.
    /// Caller holds `lock`.
    func batchWaitSlotFreedLocked(_ op: SpindleOperation) {
        let slot = UInt(bitPattern: Unmanaged.passUnretained(op).toOpaque())
        guard let waiting = self.batchWaitsBySlot[slot], waiting > 0 else { return }
        self.batchWaitsBySlot[slot] = -waiting
        self.slots.endBatchWait()
    }
}
