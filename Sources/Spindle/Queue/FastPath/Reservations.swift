import Synchronization

/// Reservations: a worker that takes an operation while a long backlog is ready also reserves the next few, and
/// runs them one after another without going back to the lock in between. One lock acquisition (and one round of
/// bookkeeping) then serves up to `batchSize` operations, which is what lets two workers drain a fast producer's
/// stream of tiny operations without taking turns on the lock for each one.
///
/// What a reserved operation is: out of its bucket (placement `reserved`, see `QueuePlacement`), still
/// `enqueued` and scheduled (so it can go back), still a member, and its queue reference is held by the worker's
/// `Reservation` (not the member list). The worker moves it to `dispatching` only when it claims it, just before
/// calling `start()`; it runs in that worker's slot (`running` counts the worker once, not each operation).
///
/// Only when it cannot change what users see:
/// - only while more than `batchThresholdPerSlot` ready operations per slot remain in the buckets, so the other
///   workers have plenty to do;
/// - only when the take that comes with it woke or started no other worker (`afterWaking`). A worker that has just
///   woken another is about to lose its CPU to it: the scheduler puts the woken thread on the waker's CPU when the
///   others are idle, and it preempts the waker there. What the waker reserved would then wait behind everything
///   the woken one runs, until that one runs out and reclaims it, so a burst's second to eighth operations started
///   last (bursts of 64 on 2 CPUs, `BENCHMARKS.md`, "A burst's reserved operations"). The woken worker reserves
///   instead, when it takes;
/// - only plain `SpindleBlockOperation`s (not subclasses), which always finish on the thread that starts them, with
///   nobody waiting on them yet, and only behind a taken operation of that kind: the batch runs in the taken
///   operation's slot, so it must have finished there (a concurrent operation still executing holds its slot, and
///   the batch would run beside it, beyond the width);
/// - a worker that runs out of work takes every other worker's unclaimed reservations back into the buckets before
///   it spins or parks (`reclaimReservationsLocked`), and so does every event that frees a slot or makes room
///   without a worker looking: a member finishing on another thread, a resume, a width change, the retry of a
///   failed thread start (`reclaimForFreeSlotLocked`). So reserved work never waits behind a worker's long operation while a slot is
///   free. And while other workers keep taking work, a reservation whose owner has claimed nothing between two of
///   their takes is stalled (its owner runs a long operation, or one that waits, perhaps for a reserved one) and
///   goes back too (`reclaimStalledReservationsLocked`): reserved work is not overtaken for long by work added
///   after it, nor starved by a stream;
/// - anything that changes which operation should start next bumps `batchEpoch`: suspending, a width change, a
///   reserved operation's priority changed, or an operation becoming ready at a higher priority than the lowest
///   one reserved (`reservedFloor`: at most the lowest level reserved since the queue last had no members; the
///   adding thread reads it without the lock, after its push, so the worker looks at the inbox again after storing
///   the floor). A worker checks the epoch before claiming each reservation and, if it moved, returns the rest to
///   the front of their buckets (at their current priorities).
///
/// Guards: a `Reservation`'s `slots`, `count`, `epoch`, `mayHold` and `seenNext` are under the queue's `lock`; its `next` is
/// atomic: the owner claims slot `next` by compare-and-swap without the lock, a reclaiming thread (under `lock`)
/// takes all the rest with one exchange, so each slot is claimed exactly once. States of a reservation: empty
/// (`next == count`) → filled (under lock, by its owner, only when empty) → drained by claims and/or one reclaim
/// → empty.
///
/// Who may call what: `reserveLocked`, `returnReservationLocked`, `reclaimReservationsLocked`,
/// `settleReservationLocked` and `setFloorLocked` with `QueueCore.lock` held; `claimReserved` by the reservation's
/// owner only, without the lock; `invalidateReservations` and `noteAdded` by any thread, with or without it.
/// Orderings: `next` is published with a release store after the slots are filled (under the lock) and claimed
/// with acquiring-and-releasing compare-and-swaps, against the reclaimer's acquiring-and-releasing exchange, so a
/// slot is claimed once and its operation's fields are visible to whoever claims it. `batchEpoch` and
/// `reservedFloor` are sequentially consistent: an adding thread's inbox push then its load of the floor, against
/// a worker's store of the floor then its epoch check before each claim.
final class Reservation: @unchecked Sendable {
    @exclusivity(unchecked) var slots: [Unmanaged<SpindleOperation>?] =
        Array(repeating: nil, count: QueueCore.batchSize)
    @exclusivity(unchecked) var count = 0
    @exclusivity(unchecked) var epoch = 0
    /// Counted in `QueueCore.reservationHolders`: it may hold unclaimed operations.
    @exclusivity(unchecked) var mayHold = false
    /// `next` as the last stall check saw it (-1 since the fill): see `reclaimStalledReservationsLocked`.
    @exclusivity(unchecked) var seenNext = -1
    let next = Atomic<Int>(0)
}

extension QueueCore {
    /// Operations a worker runs per lock acquisition at most, counting the one it takes (so `batchSize - 1` are
    /// reserved).
    static let batchSize = 8
    /// Reserve only while more than this many ready operations per slot (`limit`) remain in the buckets.
    static let batchThresholdPerSlot = 16
    /// `reservedFloor` when nothing is reserved: above every bucket level.
    static let noFloor = 6

    /// After `takeNextLocked` took `taken` and its wake decision (`wake`): fills this worker's empty reservation
    /// with the next ready operations if that decision woke or started nobody, `taken` finishes on this worker, the
    /// backlog is long enough and they qualify (see above). Caller holds `lock`.
    func reserveLocked(
        _ reservation: Reservation, behind taken: Unmanaged<SpindleOperation>, afterWaking wake: IdleWorkers.WakeAction
    ) {
        guard wake == .none else { return }
        // A taken operation someone waits for already would stop the batch at once (`someoneWaits`).
        guard taken._withUnsafeGuaranteedRef({
            type(of: $0) == SpindleBlockOperation.self && !$0.hasWaiters.load(ordering: .relaxed)
        }) else { return }
        // Saturating: a width near `Int.max` (valid: "as many as there is work for") reserves nothing.
        let (product, overflow) = self.slots.limit.multipliedReportingOverflow(by: QueueCore.batchThresholdPerSlot)
        let threshold = overflow ? Int.max : product
        guard self.ready.count > threshold else { return }
        var count = 0
        var floor = self.floorLocked
        while count < QueueCore.batchSize - 1 && self.ready.count > threshold, let link = self.ready.peekHighest() {
            let level = link._withUnsafeGuaranteedRef { op -> Int in
                guard type(of: op) == SpindleBlockOperation.self, !op.isBarrier,
                    !op.hasWaiters.load(ordering: .relaxed)
                else { return -1 }
                return Int(op.bucketLevel)
            }
            guard level >= 0 else { break }
            self.ready.remove(link)
            link._withUnsafeGuaranteedRef { op in
                op.placement.move(to: .reserved)  // the reservation holds the queue's reference now
                if op.isTimed { self.recordWaitLocked(op) }
            }
            reservation.slots[count] = link
            count += 1
            floor = min(floor, level)
        }
        guard count > 0 else { return }
        if floor != self.floorLocked { self.setFloorLocked(floor) }
        reservation.count = count
        reservation.epoch = self.batchEpoch.load(ordering: .sequentiallyConsistent)
        reservation.next.store(0, ordering: .releasing)
        reservation.seenNext = -1
        reservation.mayHold = true
        self.reservationHolders += 1
        self.reservedTotal += count
        // An add that pushed after this worker's drain may have read the floor before it was lowered above (and so
        // not bumped the epoch): its operation is admitted now, and bumps the epoch if it outranks the floor.
        self.drainInboxLocked()
    }

    /// The owner claims its next reserved operation and moves it to `dispatching`; nil when none is left (all
    /// claimed, reclaimed by another worker, or returned here because `batchEpoch` moved), or when someone waits on
    /// what the batch ran (`someoneWaits`). Without the lock, except to return them.
    ///
    /// The epoch check is where the claim takes effect: a bump between it and the compare-and-swap (a suspension,
    /// a higher-priority add) comes after the claim, as a suspension that takes the lock just after a worker's
    /// locked take comes after that take. Either way one operation per worker may start just after
    /// `isSuspended = true` returned, chosen before it (Foundation: an operation already on its way to `start` is
    /// not stopped by suspending); none is chosen after it.
    func claimReserved(_ reservation: Reservation, unlessWaitedOn justRan: Unmanaged<SpindleOperation>?,
                       lateSince lateSeen: Int) -> Unmanaged<SpindleOperation>? {
        let index = reservation.next.load(ordering: .acquiring)
        guard index < reservation.count else { return nil }
        // Not past a waiter (`someoneWaits`): the rest goes back at `settleReservationLocked`.
        if QueueCore.someoneWaits(onJustRun: justRan, lateSince: lateSeen) { return nil }
        if self.batchEpoch.load(ordering: .sequentiallyConsistent) != reservation.epoch {
            self.lock.withLock { self.returnReservationLocked(reservation) }
            return nil
        }
        let (won, _) = reservation.next.compareExchange(
            expected: index, desired: index + 1, ordering: .acquiringAndReleasing)
        guard won, let link = reservation.slots[index] else { return nil }
        link._withUnsafeGuaranteedRef { QueueCore.markDispatching($0) }
        return link
    }

    /// Puts a reservation's unclaimed operations back at the front of their buckets, in order, and marks it empty.
    /// Caller holds `lock`.
    func returnReservationLocked(_ reservation: Reservation) {
        if reservation.mayHold {
            reservation.mayHold = false
            self.reservationHolders -= 1
        }
        let from = reservation.next.exchange(reservation.count, ordering: .acquiringAndReleasing)
        guard from < reservation.count else { return }
        var index = reservation.count - 1
        while index >= from {
            let link = reservation.slots[index]!
            link._withUnsafeGuaranteedRef { op in
                op.placement.move(to: .ready)  // the member list's again
                self.ready.pushFront(link, level: op.queuePriority.bucket)
            }
            index -= 1
        }
        if self.idle.spinning { self.pushes.announce() }
    }

    /// A worker found nothing to run: take every worker's unclaimed reservations back into the buckets. Returns
    /// whether it did anything. Caller holds `lock`.
    func reclaimReservationsLocked() -> Bool {
        guard self.reservationHolders > 0 else { return false }
        for reservation in self.reservations where reservation.mayHold {
            self.returnReservationLocked(reservation)
        }
        return true
    }

    /// A slot may have come free, or the room changed, without a worker looking (a member finished on another
    /// thread, a resume, a width change): reserved operations go back to the buckets, so the wake decision that
    /// follows counts them, and they never wait behind their owner's long operation while a slot is free (with
    /// every other worker parked, nobody else would reclaim them). Caller holds `lock`.
    @inline(__always)
    func reclaimForFreeSlotLocked() {
        if self.reservationHolders > 0 && self.slots.hasFreeSlot { _ = self.reclaimReservationsLocked() }
    }

    /// Before a take: takes back each other worker's reservation whose owner claimed nothing since the previous
    /// take looked (`seenNext`), and notes where the others are. Such an owner is running a long operation, or one
    /// that waits (perhaps for one it reserved, which would then wait for ever behind a stream); its reserved
    /// operations go to the front of their buckets, to be taken now. The taking worker's own reservation is empty
    /// here (settled before its take). Caller holds `lock`.
    @inline(__always)
    func reclaimStalledReservationsLocked() {
        if self.reservationHolders > 0 { self.reclaimStalledSlowLocked() }
    }

    @inline(never)
    private func reclaimStalledSlowLocked() {
        for reservation in self.reservations where reservation.mayHold {
            let next = reservation.next.load(ordering: .acquiring)
            if next == reservation.seenNext {
                self.returnReservationLocked(reservation)
            } else {
                reservation.seenNext = next
            }
        }
    }

    /// The owner, back under the lock after its batch: its reservation is empty now. Caller holds `lock`.
    @inline(__always)
    func settleReservationLocked(_ reservation: Reservation) {
        if reservation.mayHold { self.returnReservationLocked(reservation) }
    }

    /// Something changed which operation should start next (see above). Caller holds `lock` or not.
    @inline(__always)
    func invalidateReservations() {
        self.batchEpoch.add(1, ordering: .sequentiallyConsistent)
    }

    /// Sets the floor and its lock-free mirror for adding threads. Caller holds `lock`.
    func setFloorLocked(_ floor: Int) {
        self.floorLocked = floor
        self.reservedFloor.store(floor, ordering: .sequentiallyConsistent)
    }

    /// An operation at bucket `level` became ready (pushed under the lock): reservations of lower levels must
    /// give way. Caller holds `lock`.
    @inline(__always)
    func noteReadyLocked(level: Int) {
        if level > self.floorLocked { self.invalidateReservations() }
    }

    /// An adding thread pushed an operation of bucket `level` on the inbox (after the push): if it may outrank a
    /// reserved operation, reservations must give way before the next one starts.
    @inline(__always)
    func noteAdded(level: Int) {
        if level > self.reservedFloor.load(ordering: .sequentiallyConsistent) { self.invalidateReservations() }
    }
}

extension QueueCore {
    /// `SpindleOperation.lateWaiters` before a batch's first operation runs, if anything is reserved (else 0,
    /// unused). The owner, without the lock.
    @inline(__always)
    static func lateWaitersBefore(_ reservation: Reservation) -> Int {
        reservation.next.load(ordering: .relaxed) < reservation.count
            ? SpindleOperation.lateWaiters.load(ordering: .sequentiallyConsistent) : 0
    }

    /// Before the worker claims another reserved operation: whether a thread waits for the operation it ran last
    /// (`justRan`, nil if that one did not finish here) or, having come late (`SpindleOperation.lateWaiters` moved
    /// from `lateSeen`, read before the batch's first operation ran), for any finished one of the batch. Their
    /// waiters are released only after the batch's bookkeeping, so the worker claims no more then: a later one may
    /// need what the waiter does once its wait returns (a lock it holds, a signal it sends), and running it first
    /// could wait for ever. Two loads.
    @inline(__always)
    static func someoneWaits(onJustRun justRan: Unmanaged<SpindleOperation>?, lateSince lateSeen: Int) -> Bool {
        if let justRan, justRan._withUnsafeGuaranteedRef({ $0.hasWaiters.load(ordering: .sequentiallyConsistent) }) {
            return true
        }
        return SpindleOperation.lateWaiters.load(ordering: .sequentiallyConsistent) != lateSeen
    }
}
