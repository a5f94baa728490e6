import Testing

@testable import Spindle

/// Once a worker has taken an operation (`dispatching`), only the `start()` that worker calls may start or finish
/// it: a `start()` from anywhere else throws `operationEnqueued`, as while it waits, and `finish(throwing:)` on it
/// cancelled throws `operationNotExecuting`. The `willStart` hook runs on the worker, in exactly that window.
@Suite struct QueueStartOwnershipTests {
    /// Records what `main` saw: how often it ran, and whether its queue was the calling thread's.
    final class Target: SpindleOperation, @unchecked Sendable {
        let mainRuns = QTCounter()
        let ranOnItsQueue = QTLog<Bool>()
        override func main() throws {
            self.mainRuns.increment()
            self.ranOnItsQueue.append(SpindleOperationQueue.current === self.owningQueue)
        }
    }

    @Test func aStartFromElseWhereOnATakenOperationThrowsOperationEnqueued() throws {
        let queue = try SpindleOperationQueue(name: "start-ownership", maxConcurrentOperationCount: 1)
        let fromHook = QTLog<String>()
        let fromOtherThread = QTLog<String>()
        queue.hooks = SpindleOperationQueueHooks(willStart: { _, op in
            guard op.name == "target" else { return }
            #expect(op.currentState.lifecycle == .dispatching)
            // On the worker's own thread, before the queue's start(): still the user's call, not the queue's.
            fromHook.append(opErrorCase { try op.start() } ?? "none")
            #expect(qtOnOtherThread { fromOtherThread.append(opErrorCase { try op.start() } ?? "none") })
        })
        let target = Target()
        target.name = "target"
        try queue.addOperation(target)
        qtDrain(queue)
        #expect(fromHook.all == ["operationEnqueued"])
        #expect(fromOtherThread.all == ["operationEnqueued"])
        #expect(target.mainRuns.count == 1)
        #expect(target.ranOnItsQueue.all == [true], "main ran on the queue's worker")
        #expect(target.isFinished && !target.isCancelled && target.error == nil)
    }

    @Test func aCancelledTakenOperationIsFinishedByItsQueueNotByAnotherThread() throws {
        let queue = try SpindleOperationQueue(name: "finish-ownership", maxConcurrentOperationCount: 1)
        let finishError = QTLog<String>()
        queue.hooks = SpindleOperationQueueHooks(willStart: { _, op in
            guard op.name == "target" else { return }
            op.cancel()
            #expect(qtOnOtherThread { finishError.append(opErrorCase { try op.finish(throwing: nil) } ?? "none") })
            #expect(!op.isFinished, "the queue finishes it, after this hook")
        })
        let target = OpProbe(name: "target")
        try queue.addOperation(target)
        qtDrain(queue)
        #expect(finishError.all == ["operationNotExecuting"])
        #expect(target.isFinished && target.isCancelled)
        #expect(target.mainRuns.value == 0 && target.completions.value == 1)
    }

    /// Once the queue has called its `start()`, an override may move to another thread and claim it there (the
    /// Foundation pattern of restarting on the main thread), or finish it there when cancelled.
    @Test func aStartThatHopsToAnotherThreadClaimsOrFinishesItThere() throws {
        final class Hops: SpindleOperation, @unchecked Sendable {
            let mainThreads = QTLog<String>()
            let hopErrors = QTLog<String>()
            override func start() throws {
                guard SpindleThread.current.name != "hop-target" else { return try super.start() }
                try SpindleThread.detach(name: "hop-target") {
                    if self.isCancelled {
                        self.hopErrors.append(opErrorCase { try self.finish(throwing: nil) } ?? "none")
                    } else {
                        self.hopErrors.append(opErrorCase { try self.start() } ?? "none")
                    }
                }
            }
            override func main() throws { self.mainThreads.append(SpindleThread.current.name) }
        }
        let queue = try SpindleOperationQueue(name: "start-hops", maxConcurrentOperationCount: 1)
        let runs = Hops()
        let cancelled = Hops()
        queue.isSuspended = true
        try queue.addOperation(runs)
        try queue.addOperation(cancelled)
        cancelled.cancel()
        queue.isSuspended = false
        qtDrain(queue)
        // Each hop thread records what its call returned just after the operation finished.
        #expect(qtWaitUntil { runs.hopErrors.count == 1 && cancelled.hopErrors.count == 1 })
        #expect(runs.isFinished && !runs.isCancelled && runs.mainThreads.all == ["hop-target"])
        #expect(runs.hopErrors.all == ["none"])
        #expect(cancelled.isFinished && cancelled.isCancelled && cancelled.mainThreads.all.isEmpty)
        #expect(cancelled.hopErrors.all == ["none"])
    }
}
