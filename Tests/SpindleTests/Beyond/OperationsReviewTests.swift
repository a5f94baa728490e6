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
