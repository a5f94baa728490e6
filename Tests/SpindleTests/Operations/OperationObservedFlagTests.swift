import Testing
@testable import Spindle

private typealias Change = SpindleOperation.Change

/// The `did` changes of one key delivered to one observer registered with `.initial`: each old value must be the
/// previous new value (the first one's, the initial value), and no change may repeat a value. Returns the number of
/// breaks in that chain and the last value.
private func chain(_ changes: [Change]) -> (breaks: Int, last: SpindleOperation.ObservedValue?) {
    var current = changes.first?.newValue
    var breaks = 0
    for change in changes.dropFirst() where change.phase == .did {
        if change.oldValue != current || change.oldValue == change.newValue { breaks += 1 }
        current = change.newValue
    }
    return (breaks, current)
}

/// Issue 19, gaps O1 and O2: `isReady` and `isCancelled` change by a compare-and-swap outside the operation's lock;
/// their changes are recorded by comparing the state word, read under the lock, with what observers were told.
@Suite struct OperationObservedFlagTests {
    /// O1: `addDependency` (ready → not ready) races the dependency finishing (not ready → ready) on another thread.
    /// Recorded in the order of the records rather than of the swaps, the chain breaks and the last value is wrong.
    @Test func racingReadinessChangesAreDeliveredAsAChainEndingInTheCurrentValue() throws {
        let op = OpProbe(name: "gated")
        let log = OpLog<Change>()
        op.observe([.isReady], options: .initial) { _, change in log.add(change) }
        let handoff = SpindleLockedValue<[SpindleOperation]>([])
        let ready = opSemaphore()
        let rounds = 3_000
        let adder = try OpThread.run("op-flags-add") {
            for _ in 0..<rounds {
                let dependency = OpProbe()
                try? op.addDependency(dependency)
                handoff.withLockedValue { $0.append(dependency) }
                ready.signal()
            }
        }
        let finisher = try OpThread.run("op-flags-finish") {
            for _ in 0..<rounds {
                guard ready.wait(timeout: opDeadline) else { return }
                let dependency = handoff.withLockedValue { $0.removeFirst() }
                try? dependency.start()
            }
        }
        #expect(adder.finish())
        #expect(finisher.finish())
        #expect(op.isReady)
        let changes = log.all
        #expect(changes.first?.isInitial == true)
        let (breaks, last) = chain(changes)
        #expect(breaks == 0, "a did isReady whose old value is not the previous new value")
        #expect(last == .bool(true), "the last delivered isReady is not the current value")
        #expect(opProtocolViolations(changes.dropFirst().map(\.phaseAndKey)).isEmpty)
    }

    /// O2: a `cancel` whose compare-and-swap lands while `main` runs, but whose record would come after the finish
    /// sealed the operation, is still delivered, before `did isFinished`.
    @Test func aCancelRacingTheFinishIsDeliveredBeforeDidIsFinished() throws {
        let queue = try SpindleOperationQueue(name: "observed-flags", maxConcurrentOperationCount: 1)
        var cancelledOps = 0
        for round in 0..<2_000 {
            let op = OpProbe(name: "op-\(round)")
            let log = OpLog<Change>()
            op.observe([.isCancelled, .isFinished]) { _, change in log.add(change) }
            try queue.addOperation(op)
            op.cancel()
            #expect(try op.waitUntilFinished(timeout: opDeadline))
            let described = log.all.map { "\($0)" }
            let finished = described.firstIndex(of: "did isFinished: false → true")
            #expect(finished == described.count - 1, "did isFinished is not the last change: \(described)")
            if op.isCancelled {
                cancelledOps += 1
                let cancelled = described.firstIndex(of: "did isCancelled: false → true")
                #expect(cancelled != nil && cancelled! < (finished ?? -1), "round \(round): \(described)")
            } else {
                #expect(!described.contains { $0.contains("isCancelled") }, "round \(round): \(described)")
            }
        }
        #expect(cancelledOps > 0)
        #expect(try queue.waitUntilAllOperationsAreFinished(timeout: opDeadline))
    }

    /// O2 made deterministic: the cancel's swap lands while `main` runs and its record has not come when the
    /// operation finishes (simulated by setting the bit directly, as the swap does). The finish records it first.
    @Test func aCancelNotRecordedYetWhenTheOperationFinishesComesBeforeDidIsFinished() throws {
        let op = OpProbe(name: "op") { op in
            op.state.bitwiseOr(OperationState.cancelledBit, ordering: .sequentiallyConsistent)
        }
        let log = OpLog<Change>()
        op.observe([.isCancelled, .isFinished]) { _, change in log.add(change) }
        try op.start()
        op.emitReadinessFlags()  // the cancel's late record: nothing more after the end
        #expect(log.all.map { "\($0)" } == [
            "will isCancelled: false → true", "did isCancelled: false → true",
            "will isFinished: false → true", "did isFinished: false → true",
        ])
    }

    /// An observer registered after a flag moved, but before that move was recorded, starts from the current value:
    /// the move goes to the earlier observers only.
    @Test func anObserverRegisteredBeforeARecordStartsFromTheCurrentValue() throws {
        let dependency = OpProbe(name: "dependency")
        let op = OpProbe(name: "op")
        try op.addDependency(dependency)
        let early = OpLog<Change>()
        op.observe([.isReady]) { _, change in early.add(change) }
        // The cancel's swap and its record, with a registration in between: simulated by setting the bit directly.
        op.state.bitwiseOr(OperationState.cancelledBit, ordering: .sequentiallyConsistent)
        let late = OpLog<Change>()
        op.observe([.isReady], options: .initial) { _, change in late.add(change) }
        op.emitReadinessFlags()
        #expect(late.all.map { "\($0)" } == ["initial isReady: true"])
        #expect(early.all.map { "\($0)" } == ["will isReady: false → true", "did isReady: false → true"])
    }
}
