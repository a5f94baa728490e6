import Testing

@testable import Spindle

/// The queue's locked-state units driven together, without threads, through seeded random event sequences
/// (admit, barrier, take, finish, width, suspend, park, unpark, spin, wake decisions), checking after every step
/// each unit's invariants, the cross-unit identities `QueueCore.checkInvariantsLocked` checks, and an oracle for
/// barrier order. Our stand-in for a model checker: 10^5 steps per seed, in milliseconds.
@Suite struct QueueStateModelTests {
    /// One operation of the model: its id is its admission order.
    struct Member { let isBarrier: Bool; var running = false }

    struct Model {
        var gate = BarrierGate<Int>()
        var slots = DispatchSlots(requested: 2, resolved: 2)
        var idle = IdleWorkers(servedByRunLoop: false)
        var members: [Int: Member] = [:]
        var ready: [Int] = []  // released, FIFO from `readyHead`
        var readyHead = 0
        var barrierIDs: [Int] = []  // barriers in admission order; finished ones skipped from `barrierHead`
        var barrierHead = 0
        var oldestUnfinished = 0  // ids below it have all finished
        var running: Set<Int> = []
        var nextID = 0
        var failures: [String] = []

        mutating func fail(_ what: String) { if self.failures.count < 5 { self.failures.append(what) } }

        mutating func admit(isBarrier: Bool) {
            let id = self.nextID
            self.nextID += 1
            self.members[id] = Member(isBarrier: isBarrier)
            if isBarrier { self.barrierIDs.append(id) }
            if self.gate.admit(id, isBarrier: isBarrier) { self.ready.append(id) } else { self.drainGate() }
        }

        mutating func drainGate() {
            while let next = self.gate.nextReleasable() { self.ready.append(next.element) }
        }

        mutating func take() {
            guard self.slots.canDispatch(ready: self.readyCount) else { return }
            let id = self.ready[self.readyHead]
            self.readyHead += 1
            if self.readyHead == self.ready.count {
                self.ready.removeAll(keepingCapacity: true)
                self.readyHead = 0
            }
            _ = self.slots.take()
            // Oracle: a barrier runs alone, after everything admitted before it; nothing admitted after a barrier
            // runs before that barrier has finished.
            let isBarrier = self.members[id]!.isBarrier
            while self.oldestUnfinished < self.nextID && self.members[self.oldestUnfinished] == nil {
                self.oldestUnfinished += 1
            }
            while self.barrierHead < self.barrierIDs.count && self.members[self.barrierIDs[self.barrierHead]] == nil {
                self.barrierHead += 1
            }
            if isBarrier && (!self.running.isEmpty || self.oldestUnfinished < id) {
                self.fail("barrier \(id) started with earlier members unfinished")
            }
            if self.barrierHead < self.barrierIDs.count && self.barrierIDs[self.barrierHead] < id {
                self.fail("operation \(id) started before an earlier barrier finished")
            }
            self.members[id]!.running = true
            self.running.insert(id)
        }

        var readyCount: Int { self.ready.count - self.readyHead }

        mutating func finishOne(_ pick: Int) {
            guard !self.running.isEmpty else { return }
            let id = self.running.sorted()[pick % self.running.count]
            self.running.remove(id)
            let member = self.members.removeValue(forKey: id)!
            self.slots.free()
            self.gate.finished(isBarrier: member.isBarrier)
            if self.gate.mayRelease { self.drainGate() }
        }

        func identitiesHold() -> Bool {
            self.gate.check() && self.slots.check() && self.idle.check()
                && self.members.count
                    == self.gate.activeUnfinished + self.gate.heldCount + (self.gate.barrierActive ? 1 : 0)
                && self.slots.running == self.running.count
                && (!self.members.isEmpty || self.readyCount == 0)
        }
    }

    @Test(arguments: [1, 2, 3, 0xC0FFEE] as [UInt64])
    func randomEventSequencesKeepEveryIdentity(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var model = Model()
        let threads = 4
        let parkers = (0..<threads).map { _ in ThreadParker() }
        var asleep: [ThreadParker] = []  // parked: in the idle line, or taken by a wake decision
        for step in 0..<100_000 {
            switch rng.below(100) {
            case 0..<30: model.admit(isBarrier: rng.below(10) == 0)
            case 30..<55: model.take()
            case 55..<80: model.finishOne(rng.below(8))
            case 80..<83: model.slots.setWidth(requested: rng.below(5), resolved: rng.below(5))
            case 83..<86: model.slots.setSuspended(rng.below(3) == 0)
            case 86..<94:
                // The wake decision for what could start now; a spawn is started or fails at once.
                let action = model.idle.wakeOrSpawn(
                    canDispatch: model.slots.canDispatch(ready: model.readyCount), shuttingDown: false,
                    wanted: model.slots.running + model.readyCount, limit: model.slots.limit,
                    inFlightBelow: 1 + rng.below(3))  // one event's operation, or a batch
                if case .spawn(let index) = action {
                    if index >= threads || rng.below(10) == 0 {
                        _ = model.idle.threadFailedToStart()
                        model.idle.retryStarted()
                    } else {
                        _ = model.idle.threadStarted(SpindleThread.current)
                    }
                }
            case 94..<97:
                // A worker that is not parked or spinning parks; or a parked one comes back (signalled, or seeing
                // work before sleeping, or spuriously).
                let awake = parkers.prefix(model.idle.threads.count).filter { p in !asleep.contains { $0 === p } }
                if model.idle.parked + (model.idle.spinning ? 1 : 0) < model.idle.threads.count && rng.below(2) == 0,
                    let parker = awake.first
                {
                    model.idle.parking(parker)
                    asleep.append(parker)
                } else if !asleep.isEmpty {
                    let parker = asleep.remove(at: rng.below(asleep.count))
                    let wasInLine = parker.inIdleLine
                    if model.idle.unparked(parker) == wasInLine { model.fail("step \(step): unparked misreported") }
                }
            default:
                if model.idle.spinning {
                    model.idle.endSpin()
                } else if model.idle.parked < model.idle.threads.count {
                    _ = model.idle.beginSpin()
                }
            }
            if !model.identitiesHold() {
                model.fail("step \(step): identities broken")
                break
            }
        }
        // Drain: with a free width and no suspension, everything admitted runs to the end.
        model.slots.setSuspended(false)
        model.slots.setWidth(requested: 2, resolved: 2)
        var guardSteps = 0
        while !model.members.isEmpty && guardSteps < 1_000_000 {
            model.take()
            model.finishOne(0)
            guardSteps += 1
        }
        #expect(model.failures == [])
        #expect(model.members.isEmpty && model.readyCount == 0 && model.gate.heldCount == 0)
        #expect(model.nextID > 20_000)
    }
}
