import Testing

@testable import Spindle

/// Retiring (`AfterUnlock`, "Retiring"): a worker that woke to a backlog releases its finished operations' waiters at
/// once but keeps their references until it runs out of work, `retiredLimit` are kept, or a drop batch is due; after
/// dropping them while busy it releases each batch's references before the next runs, until its next wakeup. The
/// decisions are checked on `QueueCore.perform` directly, with hand-made finished operations; then end to end.
@Suite struct QueueRetiringTests {
    /// Block operations whose only strong references are the ones handed to `after` (as a worker's finished list holds
    /// the queue's references), and weak references to them.
    private final class Weak: @unchecked Sendable {
        weak var op: SpindleBlockOperation?
        init(_ op: SpindleBlockOperation) { self.op = op }
    }

    private func finished(_ count: Int, into after: inout AfterUnlock) -> [Weak] {
        (0..<count).map { _ in
            let op = SpindleBlockOperation {}
            after.addFinished(Unmanaged.passRetained(op))
            return Weak(op)
        }
    }

    private func alive(_ ops: [Weak]) -> Int { ops.count { $0.op != nil } }

    @Test func aWokenWorkerKeepsReferencesButReleasesWaitersAtOnce() {
        let core = SpindleOperationQueue().core
        var after = AfterUnlock()
        let first = self.finished(8, into: &after)
        core.perform(&after, keepingDropsBelow: .max, retiring: true)
        #expect(self.alive(first) == 8)
        #expect(after.retiredCount == 8)
        #expect(after.keepsReferences)
        #expect(first.allSatisfy { $0.op!.currentState.isSettled })  // waiters released: settled
        let second = self.finished(8, into: &after)
        core.perform(&after, keepingDropsBelow: .max, retiring: true)
        #expect(self.alive(first + second) == 16)
        #expect(after.retiredCount == 16)
        // Out of work (or exiting): everything kept is dropped.
        core.perform(&after, keepingDropsBelow: .max)
        #expect(self.alive(first + second) == 0)
        #expect(after.retiredCount == 0 && after.hasNoReleases)
        #expect(after.keepsReferences)  // dropping at idle does not end the burst's keeping
    }

    @Test func reachingTheLimitDropsThemAndReleasesUntilTheNextWakeup() {
        let core = SpindleOperationQueue().core
        var worker = WorkerState()
        let kept = self.finished(AfterUnlock.retiredLimit - 1, into: &worker.pending)
        core.perform(&worker.pending, keepingDropsBelow: .max, retiring: true)
        #expect(self.alive(kept) == AfterUnlock.retiredLimit - 1)
        let last = self.finished(1, into: &worker.pending)
        core.perform(&worker.pending, keepingDropsBelow: .max, retiring: true)
        #expect(self.alive(kept + last) == 0)
        #expect(!worker.pending.keepsReferences)  // RELEASING: a stream, not a burst
        let streamed = self.finished(3, into: &worker.pending)
        core.perform(&worker.pending, keepingDropsBelow: .max, retiring: true)
        #expect(self.alive(streamed) == 0)
        #expect(worker.pending.retiredCount == 0)
        worker.woke(workArrivedAt: 0)  // its next wakeup: KEEPING again
        #expect(worker.pending.keepsReferences)
        let burst = self.finished(2, into: &worker.pending)
        core.perform(&worker.pending, keepingDropsBelow: .max, retiring: true)
        #expect(self.alive(burst) == 2)
        core.perform(&worker.pending)
        #expect(self.alive(burst) == 0)
    }

    @Test func nonWorkersNeverKeepReferences() {
        let core = SpindleOperationQueue().core
        var after = AfterUnlock()
        let ops = self.finished(5, into: &after)
        core.perform(&after, keepingDropsBelow: .max)
        #expect(self.alive(ops) == 0)
        #expect(after.retiredCount == 0)
    }

    /// End to end: a burst's operations (and their blocks' captures) are all freed once the queue drains, though
    /// the workers kept their references while busy; and a waiter on one of them is released when it finishes.
    @Test func aDrainedQueueHoldsNoFinishedOperation() throws {
        final class Capture: Sendable {
            let freed: QTGate
            init(_ freed: QTGate) { self.freed = freed }
            deinit { self.freed.open() }
        }
        let queue = SpindleOperationQueue()
        let freed = QTGate()
        let count = 3 * AfterUnlock.retiredLimit / 2
        for round in 0..<3 {
            queue.isSuspended = true
            var middle: SpindleBlockOperation? = nil
            for i in 0..<count {
                let capture = Capture(freed)
                let op = SpindleBlockOperation { withExtendedLifetime(capture) {} }
                if i == count / 2 { middle = op }
                try queue.addOperation(op)
            }
            queue.isSuspended = false
            let released = try middle!.waitUntilFinished(timeout: .seconds(qtDeadline))
            #expect(released, "round \(round): its waiter was not released")
            middle = nil
            qtDrain(queue)
            for i in 0..<count where !freed.wait() {
                Issue.record("round \(round): only \(i) of \(count) captures freed")
                return
            }
        }
    }
}
