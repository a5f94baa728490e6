/// Barriers: which members are released to be scheduled, and which are held behind a barrier. Generic over the
/// element so it is tested with integers; the queue uses unretained operation links (the member list owns the
/// queue's reference to a held operation, so holding it costs no retain). A unit of the queue's locked state: a
/// value stored in `QueueCore`, guarded by `QueueCore.lock`; it decides, and the caller schedules what it releases.
///
/// Rule: an operation added while a barrier is pending (held or running), or added as a barrier, is held, FIFO.
/// The oldest held barrier is released once every operation released before it has finished
/// (`activeUnfinished == 0`); it then runs alone (`barrierActive`), and the operations held behind it are
/// released when it finishes, up to the next barrier.
///
/// Fields (all under `QueueCore.lock`): `held` from `heldHead` on, the held elements in order, each with whether
/// it is a barrier (the served prefix is dropped in batches); `activeUnfinished`, released non-barrier members not
/// finished; `barrierActive`, a released barrier has not finished.
///
/// Invariants (`check()`): `barrierActive` implies `activeUnfinished == 0`; `0 <= heldHead <= held.count`; while
/// `barrierActive` is false, the first held element, if any, is a barrier (anything before it would have been
/// released); and, with the member list (`QueueCore.checkInvariantsLocked`), members ==
/// `activeUnfinished + heldCount + (barrierActive ? 1 : 0)`.
///
/// State machine: OPEN (no barrier pending: adds are released at once) → GATED (a barrier held, waiting for
/// `activeUnfinished` to reach 0: adds are held) → BARRIER (`barrierActive`: adds are held) → OPEN or GATED
/// when the barrier finishes (`finished(isBarrier: true)`, then `nextReleasable` releases up to the next
/// barrier).
struct BarrierGate<Element> {
    private(set) var held: [(element: Element, isBarrier: Bool)] = []
    private(set) var heldHead = 0
    private(set) var activeUnfinished = 0
    private(set) var barrierActive = false

    /// Elements held and not yet released.
    var heldCount: Int { self.held.count - self.heldHead }

    /// Whether a barrier is pending (held or running): an element added now would be held.
    var holdsAdds: Bool { self.barrierActive || self.heldHead < self.held.count }

    /// A member was added: returns true if it is released now (the caller schedules it), false if it is held
    /// (the caller then drains `nextReleasable`, which may release it at once if it is a barrier with nothing
    /// before it).
    @inline(__always)
    mutating func admit(_ element: Element, isBarrier: Bool) -> Bool {
        if !isBarrier && !self.barrierActive && self.heldHead == self.held.count {
            self.activeUnfinished += 1
            return true
        }
        self.held.append((element, isBarrier))
        return false
    }

    /// The next held element that may be released now, if any (call until nil after `admit` returned false or
    /// after `finished`). Drops the served prefix in batches, so memory is bounded by the elements held.
    mutating func nextReleasable() -> (element: Element, isBarrier: Bool)? {
        guard !self.barrierActive, self.heldHead < self.held.count,
            !(self.held[self.heldHead].isBarrier && self.activeUnfinished > 0)
        else {
            self.compact()
            return nil
        }
        let next = self.held[self.heldHead]
        self.heldHead += 1
        if next.isBarrier { self.barrierActive = true } else { self.activeUnfinished += 1 }
        return next
    }

    /// A released member finished (`isBarrier`: it was the running barrier).
    @inline(__always)
    mutating func finished(isBarrier: Bool) {
        if isBarrier { self.barrierActive = false } else { self.activeUnfinished -= 1 }
    }

    /// Whether `finished` may have made something releasable.
    @inline(__always)
    var mayRelease: Bool { self.heldHead < self.held.count }

    private mutating func compact() {
        if self.heldHead == self.held.count {
            if self.heldHead > 0 {
                self.held.removeAll(keepingCapacity: true)
                self.heldHead = 0
            }
        } else if self.heldHead > 64 && self.heldHead * 2 > self.held.count {
            self.held.removeFirst(self.heldHead)
            self.heldHead = 0
        }
    }

    /// The invariants above.
    func check() -> Bool {
        (!self.barrierActive || self.activeUnfinished == 0) && self.activeUnfinished >= 0 && self.heldHead >= 0
            && self.heldHead <= self.held.count
            && (self.barrierActive || self.heldHead == self.held.count || self.held[self.heldHead].isBarrier)
    }
}
