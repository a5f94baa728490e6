import Testing

@testable import Spindle

/// `BarrierGate`, `DispatchSlots` and `QueueStatistics` without threads: scripts in, decisions out.
@Suite struct QueueUnitsTests {
    /// Drains everything the gate releases now.
    private func release(_ gate: inout BarrierGate<Int>) -> [Int] {
        var out: [Int] = []
        while let next = gate.nextReleasable() { out.append(next.element) }
        return out
    }

    @Test func withoutBarriersEverythingIsReleasedAtOnce() {
        var gate = BarrierGate<Int>()
        for i in 0..<5 { do { let admitted = gate.admit(i, isBarrier: false); #expect(admitted) } }
        #expect(gate.activeUnfinished == 5 && gate.heldCount == 0 && gate.check())
    }

    @Test func aBarrierWaitsForWhatCameBeforeAndHoldsWhatComesAfter() {
        var gate = BarrierGate<Int>()
        do { let admitted = gate.admit(1, isBarrier: false); #expect(admitted) }
        do { let admitted = gate.admit(2, isBarrier: false); #expect(admitted) }
        do { let admitted = gate.admit(3, isBarrier: true); #expect(!admitted) }
        do { let released = self.release(&gate); #expect(released == []) }  // 1 and 2 are unfinished
        do { let admitted = gate.admit(4, isBarrier: false); #expect(!admitted) }  // behind the barrier
        do { let admitted = gate.admit(5, isBarrier: true); #expect(!admitted) }
        do { let admitted = gate.admit(6, isBarrier: false); #expect(!admitted) }
        #expect(gate.check())
        gate.finished(isBarrier: false)
        do { let released = self.release(&gate); #expect(released == []) }
        gate.finished(isBarrier: false)
        do { let released = self.release(&gate); #expect(released == [3]) }  // alone now
        #expect(gate.barrierActive && gate.check())
        gate.finished(isBarrier: true)
        do { let released = self.release(&gate); #expect(released == [4]) }  // up to the next barrier, which waits for 4
        gate.finished(isBarrier: false)
        do { let released = self.release(&gate); #expect(released == [5]) }
        gate.finished(isBarrier: true)
        do { let released = self.release(&gate); #expect(released == [6]) }
        #expect(gate.heldCount == 0 && gate.held.isEmpty && gate.check())  // the served prefix was dropped
    }

    @Test func aBarrierWithNothingBeforeItIsReleasedAtOnce() {
        var gate = BarrierGate<Int>()
        do { let admitted = gate.admit(1, isBarrier: true); #expect(!admitted) }
        do { let released = self.release(&gate); #expect(released == [1]) }
        #expect(gate.barrierActive)
    }

    @Test func heldStorageIsBoundedByWhatIsHeld() {
        // A barrier always pending with work behind it: without dropping the served prefix the storage would grow
        // by one entry per operation.
        var gate = BarrierGate<Int>()
        var maxStored = 0
        for i in 0..<10_000 {
            do { let admitted = gate.admit(2 * i, isBarrier: true); #expect(!admitted) }
            do { let admitted = gate.admit(2 * i + 1, isBarrier: false); #expect(!admitted) }
            do { let released = self.release(&gate); #expect(released == [2 * i]) }
            gate.finished(isBarrier: true)
            do { let released = self.release(&gate); #expect(released == [2 * i + 1]) }
            gate.finished(isBarrier: false)
            maxStored = max(maxStored, gate.held.count)
        }
        #expect(maxStored <= 2)
    }

    @Test func slotsCountWidthAndSuspension() {
        var slots = DispatchSlots(requested: -1, resolved: 2)
        #expect(slots.canDispatch(ready: 1) && !slots.canDispatch(ready: 0))
        #expect(slots.room(ready: 5) == 2)
        let first = slots.take(), second = slots.take()
        #expect(first == 1 && second == 2)
        #expect(!slots.canDispatch(ready: 1) && slots.room(ready: 5) == 0)
        slots.setWidth(requested: 1, resolved: 1)  // lowered below the running count: nothing stops
        #expect(slots.running == 2 && slots.requestedLimit == 1 && slots.check())
        slots.free()
        slots.free()
        #expect(slots.canDispatch(ready: 1))
        slots.setSuspended(true)
        #expect(!slots.canDispatch(ready: 1) && slots.room(ready: 3) == 0 && !slots.hasFreeSlot)
    }

    @Test func statisticsRecordFinishesHighWaterMarksAndWaits() {
        var stats = QueueStatistics()
        stats.recordFinish(cancelled: true, failed: false)
        stats.recordFinish(cancelled: true, failed: true)
        stats.recordFinish(cancelled: false, failed: false)
        stats.noteMembers(3)
        stats.noteMembers(1)
        stats.noteRunning(2)
        stats.recordWait(10)
        stats.recordWait(30)
        stats.recordRejected()
        stats.recordRanOnCaller(4)
        #expect(stats.finished == 3 && stats.cancelled == 2 && stats.failed == 1)
        #expect(stats.highWaterMembers == 3 && stats.highWaterRunning == 2)
        #expect(stats.waitSamples == 2 && stats.waitTotalNs == 40 && stats.waitMaxNs == 30)
        #expect(stats.rejected == 1 && stats.ranOnCaller == 4 && stats.check())
    }

    /// The members in order, walked as the queue walks them.
    private func walk(_ list: MemberList) -> [SpindleOperation] {
        var out: [SpindleOperation] = []
        var node = list.first
        while let link = node {
            let op = link.takeUnretainedValue()
            out.append(op)
            node = op.memberNext
        }
        return out
    }

    @Test func theMemberListKeepsOrderAndCountsThroughUnlinksAnywhere() {
        let ops = (0..<5).map { _ in SpindleOperation() }
        var list = MemberList()
        #expect(list.check() && list.first == nil && list.count == 0)
        for (i, op) in ops.enumerated() { list.append(Unmanaged.passUnretained(op), isBarrier: i == 2) }
        #expect(self.walk(list).map(ObjectIdentifier.init) == ops.map(ObjectIdentifier.init))
        #expect(list.count == 5 && list.barrierCount == 1 && list.countedByCapacity == 4 && list.check())
        list.unlink(ops[2], isBarrier: true)  // middle
        list.unlink(ops[0], isBarrier: false)  // first
        list.unlink(ops[4], isBarrier: false)  // last
        #expect(self.walk(list).map(ObjectIdentifier.init) == [ops[1], ops[3]].map(ObjectIdentifier.init))
        #expect(list.count == 2 && list.barrierCount == 0 && list.check())
        #expect(ops[2].memberNext == nil && ops[2].memberPrev == nil)  // an unlinked operation keeps no links
        list.unlink(ops[1], isBarrier: false)
        list.unlink(ops[3], isBarrier: false)
        #expect(list.first == nil && list.count == 0 && list.check())
        list.append(Unmanaged.passUnretained(ops[0]), isBarrier: false)  // usable again once empty
        #expect(self.walk(list).count == 1 && list.check())
        list.unlink(ops[0], isBarrier: false)
    }
}

/// `DrainWaiters`: registration, withdrawal and the drain's take, without threads.
@Suite struct DrainWaitersTests {
    @Test func aWaiterIsTakenByTheDrainOrWithdrawnNeverBoth() throws {
        var waiters = DrainWaiters()
        #expect(waiters.isEmpty && waiters.check())
        let a = try SpindleSemaphore(value: 0), b = try SpindleSemaphore(value: 0)
        waiters.add(a)
        waiters.add(b)
        #expect(waiters.list?.count == 2 && waiters.check())
        waiters.withdraw(a)
        #expect(waiters.list.map { $0.map(ObjectIdentifier.init) } == [ObjectIdentifier(b)])
        let taken = waiters.takeAll()
        #expect(taken?.count == 1 && taken?.first === b)
        #expect(waiters.isEmpty && waiters.check(), "nil again, not an empty list")
        waiters.withdraw(b)  // the drain took it: a no-op
        #expect(waiters.isEmpty)
        #expect(waiters.takeAll() == nil)
    }

    @Test func theLastWithdrawalLeavesNoList() throws {
        var waiters = DrainWaiters()
        let a = try SpindleSemaphore(value: 0)
        waiters.add(a)
        waiters.withdraw(a)
        #expect(waiters.list == nil && waiters.check())
    }
}

/// `AfterUnlock`: what an event leaves to do, collected in order, and what `takeReleases` hands over.
@Suite struct AfterUnlockTests {
    @Test func finishedOperationsChainInTheOrderAdded() {
        let ops = (0..<3).map { _ in SpindleBlockOperation {} }
        var after = AfterUnlock()
        #expect(after.hasNoReleases && after.wake.isEmpty)
        for op in ops { after.addFinished(Unmanaged.passUnretained(op)) }
        #expect(!after.hasNoReleases)
        var chain: [ObjectIdentifier] = []
        var node = after.finished
        while let link = node {
            chain.append(ObjectIdentifier(link.takeUnretainedValue()))
            node = link.takeUnretainedValue().nextLink
        }
        #expect(chain == ops.map(ObjectIdentifier.init))
        for op in ops { op.nextLink = nil }
    }

    @Test func semaphoresAccumulateAndNilAddsNothing() throws {
        var after = AfterUnlock()
        after.addSemaphores(nil)
        #expect(after.semaphores == nil && after.hasNoReleases)
        let a = try SpindleSemaphore(value: 0), b = try SpindleSemaphore(value: 0)
        after.addSemaphores([a])
        after.addSemaphores([b])
        #expect(after.semaphores?.count == 2 && after.semaphores?[0] === a && after.semaphores?[1] === b)
    }

    @Test func takingTheReleasesLeavesTheWakeAndTheDrops() throws {
        let op = SpindleBlockOperation {}
        var after = AfterUnlock()
        after.addFinished(Unmanaged.passUnretained(op))
        after.addSemaphores([try SpindleSemaphore(value: 0)])
        after.dropped = Unmanaged.passUnretained(op)
        after.outstandingDrops = 3
        after.wake.add(.spawn(4))
        let (finished, semaphores, dropped) = after.takeReleases()
        #expect(finished?.takeUnretainedValue() === op && semaphores?.count == 1 && dropped?.takeUnretainedValue() === op)
        #expect(after.hasNoReleases && after.finished == nil)
        #expect(after.outstandingDrops == 3 && after.wake.spawns == 1 && after.wake.firstSpawn == 4)
        after.addFinished(Unmanaged.passUnretained(op))
        #expect(after.finished?.takeUnretainedValue() === op, "a fresh chain after the take")
        op.nextLink = nil
    }
}
