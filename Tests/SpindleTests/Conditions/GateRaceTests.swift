import Synchronization
import Testing

@testable import Spindle

/// Races around the gate, repeated: cancel against the gate's opening and against a grant, the last dependency
/// against arming, a release against a waiter's cancel. Each round checks that every operation finished exactly
/// once, that nothing ran after being cancelled before its gate, and that the category is free at the end (a probe
/// of the category runs).
@Suite struct GateRaceTests {
    /// After a round: a fresh operation of `category` runs, so nothing kept it.
    private func expectFree(_ category: String, on queue: SpindleOperationQueue,
                            sourceLocation: SourceLocation = #_sourceLocation) throws {
        let probe = CTOp("probe")
        try probe.addExclusivityCategory(category)
        try queue.addOperation(probe)
        let done = (try? probe.waitUntilFinished(timeout: .seconds(qtDeadline))) ?? false
        #expect(done && probe.runs.count == 1, "the category stayed held", sourceLocation: sourceLocation)
        #expect(!ExclusivityController.shared.isHeld(category), sourceLocation: sourceLocation)
    }

    @Test func cancelRacingTheGateOpening() throws {
        let category = ctCategory("race-open")
        let queue = try SpindleOperationQueue(name: "gr-open", maxConcurrentOperationCount: 3)
        for round in 0..<200 {
            let condition = CTCondition("c\(round)")
            let op = CTOp("op\(round)")
            try op.addCondition(condition)
            try op.addExclusivityCategory(category)
            let go = QTRendezvous(parties: 2)
            let canceller = try BTThread("gr-cancel") {
                _ = go.arrive()
                op.cancel()
            }
            _ = go.arrive()
            try queue.addOperation(op)
            #expect(canceller.join())
            let finished = ctFinish(op)
            #expect(op.completions.count == 1 && op.runs.count <= 1 && condition.evaluated.count <= 1)
            if op.runs.count == 1 { #expect(condition.evaluated.count == 1) }
            if !finished { break }  // the first failed round is reported; more would only add their deadlines
        }
        qtDrain(queue)
        try self.expectFree(category, on: queue)
    }

    @Test func theLastDependencyRacingTheArmingOpensTheGateExactlyOnce() throws {
        let mine = try SpindleOperationQueue(name: "gr-arm", maxConcurrentOperationCount: 2)
        let other = try SpindleOperationQueue(name: "gr-arm-other", maxConcurrentOperationCount: 2)
        for round in 0..<300 {
            let upstream = CTOp("up\(round)")
            let sawUnfinished = QTFlag()
            let condition = CTCondition("after-up", decide: { _ in
                if !upstream.isFinished { sawUnfinished.set() }
                return .satisfied
            })
            let op = CTOp("op\(round)")
            try op.addDependency(upstream)
            try op.addCondition(condition)
            try other.addOperation(upstream)  // may finish before, during or after the add below
            try mine.addOperation(op)
            let finished = ctFinish(op)
            #expect(op.runs.count == 1 && condition.evaluated.count == 1 && !sawUnfinished.isSet)
            if !finished { break }  // the first failed round is reported; more would only add their deadlines
        }
        qtDrain(mine)
        qtDrain(other)
    }

    @Test func aReleaseRacingTheCancelOfTheNextWaiter() throws {
        let category = ctCategory("race-release")
        let queues = [try SpindleOperationQueue(name: "gr-rel-1", maxConcurrentOperationCount: 2),
                      try SpindleOperationQueue(name: "gr-rel-2", maxConcurrentOperationCount: 2)]
        let inside = QTHighWater()
        for round in 0..<150 {
            let (holder, started, release) = try ctBlockingHolder("h\(round)", category: category, inside: inside)
            try queues[0].addOperation(holder)
            #expect(started.wait())
            let victim = CTOp("v\(round)", inside: inside)
            try victim.addExclusivityCategory(category)
            let next = CTOp("n\(round)", inside: inside)
            try next.addExclusivityCategory(category)
            try queues[1].addOperation(victim)
            try queues[0].addOperation(next)
            let go = QTRendezvous(parties: 2)
            let canceller = try BTThread("gr-victim") {
                _ = go.arrive()
                victim.cancel()
            }
            _ = go.arrive()
            release.open()  // the holder finishes while the victim is being cancelled
            #expect(canceller.join())
            let finished = [ctFinish(next), ctFinish(victim)].allSatisfy { $0 }
            #expect(next.runs.count == 1 && victim.completions.count == 1 && next.completions.count == 1)
            #expect(victim.runs.count <= 1)
            if !finished { break }  // the first failed round is reported; more would only add their deadlines
        }
        for queue in queues { qtDrain(queue) }
        #expect(inside.maximum == 1)
        try self.expectFree(category, on: queues[0])
    }

    @Test func manyThreadsAddAndCancelOperationsInOverlappingCategories() throws {
        let names = (0..<3).map { ctCategory("mix\($0)") }
        let queues = try (0..<3).map { try SpindleOperationQueue(name: "gr-mix-\($0)", maxConcurrentOperationCount: 3) }
        let inside = names.map { _ in QTHighWater() }
        let all = QTLog<CTOp>()
        try runJoinableThreads(3, name: "gr-mix") { t in
            var rng = SplitMix64(seed: UInt64(t + 1) &* 0x9E37_79B9_7F4A_7C15)
            for i in 0..<150 {
                let mine = names.indices.filter { _ in rng.next() & 1 == 1 }
                let op = CTOp("t\(t)-\(i)") {
                    for k in mine { inside[k].enter() }
                    for k in mine.reversed() { inside[k].leave() }
                }
                for k in mine.reversed() { try! op.addExclusivityCategory(names[k]) }
                if rng.next() % 4 == 0 {
                    try! op.addCondition(CTCondition("half", decide: { _ in
                        i % 2 == 0 ? .satisfied : .failed(CTError(code: i))
                    }))
                }
                all.append(op)
                try! queues[Int(rng.next() % 3)].addOperation(op)
                if rng.next() % 5 == 0 { op.cancel() }
            }
        }
        for queue in queues { qtDrain(queue) }
        #expect(all.count == 450 && all.all.allSatisfy { $0.completions.count == 1 && $0.runs.count <= 1 })
        #expect(inside.allSatisfy { $0.maximum <= 1 })
        for name in names { try self.expectFree(name, on: queues[0]) }
    }
}
