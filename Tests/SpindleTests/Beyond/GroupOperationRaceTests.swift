import Synchronization
import Testing

@testable import Spindle

/// `SpindleGroupOperation` races: an add racing the last child's finish (in a loop), adds from many threads while
/// children finish, a cancel racing adds; and the count's transition table.
@Suite struct GroupOperationRaceTests {
    /// Each round: a group whose one child finishes at once, and another thread adding a child at that moment.
    /// Whatever the timing, the add is either accepted, and the group finishes after that child, or refused with
    /// `groupFinished`, and the child never runs. The group finishes exactly once.
    @Test func anAddRacingTheLastChildsFinishIsWaitedForOrRefused() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 4)
        var accepted = 0
        var refused = 0
        for round in 0..<400 {
            let group = try SpindleGroupOperation(operations: [GTChild("last")])
            let late = GTChild("late\(round)")
            let witness = GTFinishWitness(group, children: { [late] })  // "late finished" when accepted
            let outcome = QTLog<String>()
            let go = QTGate()
            let adder = try BTThread("gt-adder") {
                go.wait()
                do {
                    try group.addOperation(late)
                    outcome.append("accepted")
                } catch {
                    let refused = "\(error)" == SpindleError.groupFinished(name: group.displayName).description
                    outcome.append(refused ? "refused" : "\(error)")
                }
            }
            try queue.addOperation(group)
            go.open()
            gtWait(group)
            #expect(adder.join())
            switch outcome.all {
            case ["accepted"]:
                accepted += 1
                #expect(witness.finishedOnceAfterChildren, "round \(round): the group finished before 'late'")
                #expect(late.runs.count == 1)
            case ["refused"]:
                refused += 1
                #expect(witness.finishedCount.count == 1 && late.runs.count == 0 && !late.isFinished)
                #expect(late.parentGroup == nil, "a refused operation stayed linked")
            default:
                Issue.record("round \(round): \(outcome.all)")
            }
        }
        #expect(accepted + refused == 400)
        qtDrain(queue)
    }

    /// Four threads keep adding children (each of which may add one more from its `main`) while earlier children
    /// finish; then the adders stop and the group finishes once, after every child it accepted.
    @Test func concurrentAddsWhileChildrenFinishLoseNoChild() throws {
        let queue = SpindleOperationQueue()
        let holder = GTChild("holder", waits: true)
        let group = try SpindleGroupOperation(operations: [holder], maxConcurrentOperationCount: 3)
        let accepted = QTLog<GTChild>()
        try queue.addOperation(group)
        try runJoinableThreads(4, name: "gt-add") { t in
            for i in 0..<200 {
                let child = GTChild("t\(t)-\(i)") { [unowned group] op in
                    if i % 10 == 0 {
                        let extra = GTChild("t\(t)-\(i)-extra")
                        try group.addOperation(extra)
                        accepted.append(extra)
                    }
                }
                do {
                    try group.addOperation(child)
                    accepted.append(child)
                } catch {
                    Issue.record("add refused while the holder runs: \(error)")
                }
            }
        }
        let witness = GTFinishWitness(group, children: { accepted.all })
        holder.proceed()
        gtWait(group)
        let all = accepted.all
        #expect(all.count == 4 * 220)
        #expect(all.allSatisfy { $0.runs.count == 1 && $0.isFinished }, "a child accepted by the group was lost")
        #expect(witness.finishedOnceAfterChildren)
        qtDrain(queue)
    }

    /// A cancel racing adds from another thread: every child ends cancelled or ran; none is left unfinished, and
    /// none added after `cancel()` returned runs.
    @Test func aCancelRacingAddsLeavesNoChildBehind() throws {
        let queue = SpindleOperationQueue()
        for round in 0..<50 {
            let holder = GTChild("holder", waits: true)
            let group = try SpindleGroupOperation(operations: [holder])
            try queue.addOperation(group)
            #expect(holder.started.wait())
            let cancelReturned = Atomic<Bool>(false)
            let afterCancel = QTLog<GTChild>()
            let added = QTLog<GTChild>()
            let adder = try BTThread("gt-adder") {
                for i in 0..<50 {
                    let child = GTChild("r\(round)-\(i)")
                    let late = cancelReturned.load(ordering: .acquiring)
                    guard (try? group.addOperation(child)) != nil else { return }
                    added.append(child)
                    if late { afterCancel.append(child) }
                }
            }
            group.cancel()
            cancelReturned.store(true, ordering: .releasing)
            #expect(adder.join())
            gtWait(group)
            #expect(added.all.allSatisfy { $0.isFinished }, "round \(round): a child was left unfinished")
            #expect(afterCancel.all.allSatisfy { $0.runs.count == 0 && $0.isCancelled },
                    "round \(round): a child added after cancel() returned ran")
        }
        qtDrain(queue)
    }

    @Test func theCountsTransitionTable() {
        var count = GroupChildCount()
        let admittedWhileGathering = count.admit(2)
        #expect(admittedWhileGathering && count.pending == 2 && count.phase == .gathering)
        let sealedWhileGathering = count.release(2)
        #expect(!sealedWhileGathering, "gathering never seals")
        let emptyStart = count.start()
        #expect(emptyStart == .started(sealed: true), "started with nothing pending: sealed at once")
        let admittedWhenSealed = count.admit(1)
        #expect(!admittedWhenSealed && count.pending == 0, "sealed refuses")
        let startAgain = count.start()
        #expect(startAgain == .alreadyStarted(sealed: true))

        var running = GroupChildCount()
        _ = running.admit(3)
        let start = running.start()
        #expect(start == .started(sealed: false) && running.phase == .running)
        let second = running.start()
        #expect(second == .alreadyStarted(sealed: false))
        let first = running.release(1)
        let more = running.admit(1)
        #expect(!first && more && running.pending == 3)
        let notYet = running.release(2)
        let last = running.release(1)
        #expect(!notYet && last && running.phase == .sealed)
        let emptyBatch = running.admit(0)
        #expect(!emptyBatch, "sealed refuses even an empty batch")
    }
}
