import Testing

@testable import Spindle

/// A review of the operations layer (2026-11-26): each test failed before its fix.
@Suite("Review of the operations layer", .timeLimit(.minutes(2))) struct OperationsReviewTests {
    /// The group waits for `outsider`, which waits for `child`, which runs only once the group has started: a cycle
    /// that `addDependency` must refuse (SEMANTICS Part 1 §2), whichever of the two links comes last.
    @Test(arguments: [false, true]) func aCycleThroughAGroupsOwnChildIsRefused(groupLinkFirst: Bool) throws {
        let child = SpindleBlockOperation {}
        child.name = "child"
        let group = try SpindleGroupOperation(operations: [child])
        group.name = "group"
        let outsider = SpindleBlockOperation {}
        outsider.name = "outsider"
        var refused = false
        if groupLinkFirst {
            try group.addDependency(outsider)
            do { try outsider.addDependency(child) } catch { refused = true }
        } else {
            try outsider.addDependency(child)
            do { try group.addDependency(outsider) } catch { refused = true }
        }
        #expect(refused, "the last link closed group -> outsider -> child (inside group) unrefused")
        let queue = SpindleOperationQueue(name: "rev-cycle")
        try queue.addOperations([group, outsider])
        let finished = try group.waitUntilFinished(timeout: .seconds(10))
        #expect(finished, "deadlock: group=\(group) outsider=\(outsider) child=\(child)")
        if !finished { outsider.cancel() }  // breaks the cycle so nothing is left hanging
        _ = try group.waitUntilFinished(timeout: .seconds(10))
    }

    /// An observer of `isFinished` runs on the operation's own finish path (before its completion block and its
    /// waiters), and a `did isExecuting` one on its start path (before `main`). Waiting for the operation there waits
    /// for itself: it must throw `waitOnSelf`, as the completion block and the queue's `didFinish` hook do (SEMANTICS
    /// Part 1 §3), not block.
    @Test(arguments: [true, false]) func aWaitForItselfFromItsOwnObserverThrows(finishing: Bool) throws {
        let op = SpindleBlockOperation {}
        op.name = "observed"
        let outcome = OpBox<String>("observer not called")
        let token = op.observe([finishing ? .isFinished : .isExecuting]) { observed, change in
            guard change.phase == .did, change.newValue.boolValue == true else { return }
            let started = monotonicSeconds()
            let result = opErrorCase {
                let finished = try observed.waitUntilFinished(timeout: .seconds(10))
                outcome.value = "returned \(finished) after \(Int(monotonicSeconds() - started)) s"
            }
            if let result { outcome.value = result }
        }
        try op.start()
        #expect(outcome.value == "waitOnSelf")
        withExtendedLifetime(token) {}
    }

    /// Replacing a completion block releases the old one while the operation's lock is held: a capture whose deinit
    /// touches the operation (user code) deadlocks on that lock (SpindleOperation.swift, `completionBlock` setter).
    @Test func revReplacingACompletionBlockReleasesTheOldOneOutsideTheLock() throws {
        let op = SpindleBlockOperation {}
        let released = opSemaphore()
        do {
            let probe = RevDeinitProbe(op, released)
            op.completionBlock = { withExtendedLifetime(probe) {} }
        }
        let setter = try OpThread.run("rev-setter") { op.completionBlock = nil }
        let ok = released.wait(timeout: opDeadline)
        #expect(ok, "the old completion block's capture was released under the operation's lock: deadlock")
        if ok { #expect(setter.finish()) }
    }
}

extension OperationsReviewTests {
    /// The usual Foundation pattern: suspend, add, wire the dependencies, resume. `b` lists unfinished `a`, so it
    /// must not be ready and must not start before `a` has finished (SEMANTICS E32; Apple: "not considered ready
    /// until all of its dependent operations have finished"; only an executing operation is exempt, E35).
    @Test func revDependencyAddedWhileWaitingInASuspendedQueueHoldsTheOperationBack() throws {
        let queue = try SpindleOperationQueue(name: "rev-late-dep", maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let log = OpLog<String>()
        let a = SpindleBlockOperation { log.add("a") }
        let b = SpindleBlockOperation { log.add("b") }
        try queue.addOperations([b, a])
        try b.addDependency(a)
        #expect(b.dependencies == [a])
        #expect(!b.isReady, "b lists unfinished a but reports ready: \(b)")
        queue.isSuspended = false
        #expect(try b.waitUntilFinished(timeout: opDeadline))
        #expect(try a.waitUntilFinished(timeout: opDeadline))
        #expect(log.all == ["a", "b"])
    }

    /// The same in a busy queue that is not suspended: `b` waits in its bucket behind a running operation when the
    /// dependency is added; `a` runs on another queue.
    @Test func aDependencyAddedWhileWaitingBehindARunningOperationHoldsItBack() throws {
        let queue = try SpindleOperationQueue(name: "rev-late-dep-busy", maxConcurrentOperationCount: 1)
        let other = try SpindleOperationQueue(name: "rev-late-dep-other", maxConcurrentOperationCount: 1)
        let log = OpLog<String>()
        let blockerRuns = opSemaphore(), releaseBlocker = opSemaphore(), releaseA = opSemaphore()
        queue.addOperation {
            blockerRuns.signal()
            _ = releaseBlocker.wait(timeout: opDeadline)
        }
        #expect(blockerRuns.wait(timeout: opDeadline))
        let b = SpindleBlockOperation { log.add("b") }
        try queue.addOperation(b)
        let a = SpindleBlockOperation {
            _ = releaseA.wait(timeout: opDeadline)
            log.add("a")
        }
        let probeRan = opSemaphore()
        queue.addOperation { probeRan.signal() }  // behind b: it runs first only if b is held back
        _ = queue.snapshot()  // admits the adds: b is found ready and waits in its bucket
        try b.addDependency(a)
        #expect(!b.isReady)
        try other.addOperation(a)
        releaseBlocker.signal()  // the slot comes free while a still waits
        #expect(probeRan.wait(timeout: opDeadline))
        #expect(log.all.isEmpty, "b ran before its dependency")
        releaseA.signal()
        #expect(try b.waitUntilFinished(timeout: opDeadline))
        #expect(log.all == ["a", "b"])
    }

    /// Held back, then cancelled: it finishes unrun without waiting for the dependency (a cancelled operation is
    /// ready); a dependency that had already finished when added holds nothing back.
    @Test func aHeldBackOperationCancelledFinishesAndAFinishedDependencyHoldsNothing() throws {
        let queue = try SpindleOperationQueue(name: "rev-late-dep-cancel", maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let never = SpindleBlockOperation {}
        let b = SpindleBlockOperation { Issue.record("b ran") }
        try queue.addOperation(b)
        try b.addDependency(never)
        #expect(!b.isReady)
        b.cancel()
        queue.isSuspended = false
        #expect(try b.waitUntilFinished(timeout: opDeadline))
        let done = SpindleBlockOperation {}
        try done.start()
        queue.isSuspended = true
        let c = SpindleBlockOperation {}
        try queue.addOperation(c)
        try c.addDependency(done)
        #expect(c.isReady && c.dependencies == [done])
        queue.isSuspended = false
        #expect(try c.waitUntilFinished(timeout: opDeadline))
    }
}

/// Reads the operation's name (which takes its lock) when released.
private final class RevDeinitProbe: @unchecked Sendable {
    let op: SpindleOperation
    let released: SpindleSemaphore
    init(_ op: SpindleOperation, _ released: SpindleSemaphore) {
        self.op = op
        self.released = released
    }
    deinit {
        _ = self.op.name
        self.released.signal()
    }
}

extension OperationsReviewTests {
    /// The same behind a barrier: `b` is held behind a running barrier (already found ready) when the dependency is
    /// added; the barrier's end releases the operations behind it, but `b` must still wait for `a`.
    @Test func aDependencyAddedWhileHeldBehindABarrierHoldsItBack() throws {
        let queue = try SpindleOperationQueue(name: "rev-late-dep-barrier", maxConcurrentOperationCount: 2)
        let other = try SpindleOperationQueue(name: "rev-late-dep-barrier-other", maxConcurrentOperationCount: 1)
        let log = OpLog<String>()
        let barrierRuns = opSemaphore(), releaseBarrier = opSemaphore(), releaseA = opSemaphore()
        _ = queue.addBarrierBlock {
            barrierRuns.signal()
            _ = releaseBarrier.wait(timeout: opDeadline)
        }
        #expect(barrierRuns.wait(timeout: opDeadline))
        let b = SpindleBlockOperation { log.add("b") }
        try queue.addOperation(b)
        let probeRan = opSemaphore()
        queue.addOperation { probeRan.signal() }  // held with b, released with it
        _ = queue.snapshot()  // admits the adds: b is held behind the barrier, already found ready
        let a = SpindleBlockOperation {
            _ = releaseA.wait(timeout: opDeadline)
            log.add("a")
        }
        try b.addDependency(a)
        #expect(!b.isReady, "b lists unfinished a but reports ready: \(b)")
        try other.addOperation(a)
        releaseBarrier.signal()  // releases b and the probe while a still waits
        #expect(probeRan.wait(timeout: opDeadline))
        #expect(log.all.isEmpty, "b ran before its dependency")
        releaseA.signal()
        #expect(try b.waitUntilFinished(timeout: opDeadline))
        #expect(log.all == ["a", "b"])
    }
}

extension OperationsReviewTests {
    /// The order the group-cycle fix of the fifth round did not see: `x` is made to wait for a group one of whose
    /// children already waits, through `y`, for `x`. The group ends only after its child, so `x` would never start:
    /// refused as a cycle, nothing changed, and everything still runs. A group nested in the group counts too.
    @Test(arguments: [false, true]) func anOperationMadeToWaitForAGroupWhoseChildWaitsForItIsRefused(nested: Bool) throws {
        let x = SpindleBlockOperation {}
        x.name = "x"
        let y = SpindleBlockOperation {}
        y.name = "y"
        let child = SpindleBlockOperation {}
        child.name = "child"
        try y.addDependency(x)
        try child.addDependency(y)
        let group: SpindleGroupOperation
        if nested {
            let inner = try SpindleGroupOperation(operations: [child])
            inner.name = "inner"
            group = try SpindleGroupOperation(operations: [inner])
        } else {
            group = try SpindleGroupOperation(operations: [child])
        }
        group.name = "group"
        var cycle: [String] = []
        do {
            try x.addDependency(group)
        } catch {
            if case .dependencyCycle(let names) = error { cycle = names }
        }
        #expect(cycle.first == "x" && cycle.last == "x" && cycle.contains("child"), "not refused: \(cycle)")
        #expect(x.dependencies.isEmpty && x.isReady)
        // Two at once whatever the CPU count: the group holds a slot while its child waits for `y` on this queue.
        let queue = try SpindleOperationQueue(name: "rev-group-child-cycle", maxConcurrentOperationCount: 2)
        try queue.addOperations([group, x, y])
        #expect(try group.waitUntilFinished(timeout: opDeadline), "deadlock: group=\(group) x=\(x) y=\(y)")
        #expect(child.isFinished && !child.isCancelled)
    }

    /// Not a cycle: `x` waits for a group whose child waits for something else; the group's children are followed
    /// only to what they wait for.
    @Test func anOperationMayWaitForAGroupWhoseChildrenWaitElsewhere() throws {
        let other = SpindleBlockOperation {}
        let x = SpindleBlockOperation {}
        let child = SpindleBlockOperation {}
        try child.addDependency(other)
        let watcher = SpindleBlockOperation {}
        try watcher.addDependency(x)  // x has a dependent, so the search runs
        let group = try SpindleGroupOperation(operations: [child])
        try x.addDependency(group)
        let queue = try SpindleOperationQueue(name: "rev-group-child-no-cycle")
        try queue.addOperations([other, group, x, watcher])
        #expect(try watcher.waitUntilFinished(timeout: opDeadline))
        #expect(x.isFinished && group.isFinished && child.isFinished)
    }
}
