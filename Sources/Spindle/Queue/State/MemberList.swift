/// The queue's members: every operation added and not yet through its bookkeeping after finishing, in the order
/// they were added, barriers included, linked through the operations' own `memberNext`/`memberPrev` (intrusive:
/// linking allocates nothing). A unit of the queue's locked state: a value stored in `QueueCore`, guarded by
/// `QueueCore.lock` (as are the operations' member links); it decides nothing and acts on nothing but the links.
///
/// Walk it by pull: `first`, then each operation's `memberNext` (under the lock).
///
/// Invariants (`check()`, and `QueueCore.checkInvariantsLocked` across units): `first` and `last` are nil together,
/// exactly when `count == 0`; `0 <= barrierCount <= count`; `countedByCapacity == count - barrierCount`. The
/// member list owns the queue's reference to a member while its `placement` says so (see `QueuePlacement`).
struct MemberList {
    private(set) var first: Unmanaged<SpindleOperation>? = nil
    private(set) var last: Unmanaged<SpindleOperation>? = nil
    /// All members, barriers included.
    private(set) var count = 0
    private(set) var barrierCount = 0

    /// Members that count against a bounded queue's capacity (and that `operations` lists): barriers excluded.
    @inline(__always)
    var countedByCapacity: Int { self.count - self.barrierCount }

    /// Links `link` last. Its member links must be unset (it is not a member).
    @inline(__always)
    mutating func append(_ link: Unmanaged<SpindleOperation>, isBarrier: Bool) {
        let last = self.last
        link._withUnsafeGuaranteedRef { op in
            op.memberNext = nil
            op.memberPrev = last
        }
        if let last { last._withUnsafeGuaranteedRef { $0.memberNext = link } } else { self.first = link }
        self.last = link
        self.count += 1
        if isBarrier { self.barrierCount += 1 }
    }

    /// Unlinks `op`, a member, and clears its member links.
    @inline(__always)
    mutating func unlink(_ op: SpindleOperation, isBarrier: Bool) {
        let prev = op.memberPrev
        let next = op.memberNext
        if let prev { prev._withUnsafeGuaranteedRef { $0.memberNext = next } } else { self.first = next }
        if let next { next._withUnsafeGuaranteedRef { $0.memberPrev = prev } } else { self.last = prev }
        op.memberNext = nil
        op.memberPrev = nil
        self.count -= 1
        if isBarrier { self.barrierCount -= 1 }
    }

    /// The invariants above (O(1): the links themselves are checked by the tests' walks).
    func check() -> Bool {
        (self.first == nil) == (self.last == nil) && (self.first == nil) == (self.count == 0)
            && self.barrierCount >= 0 && self.barrierCount <= self.count
    }
}
