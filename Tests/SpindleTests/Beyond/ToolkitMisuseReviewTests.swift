import Synchronization
import Testing

@testable import Spindle

/// Misuse a review found in backpressure, deadlines and retries: each test failed (a hang, a spin, or a refused
/// operation kept alive until its deadline) before its fix.
@Suite(.serialized) struct ToolkitMisuseReviewTests {
    // MARK: - callerRuns

    /// A width-1 bounded `.callerRuns` queue: its running operation adds, to its own full queue, an operation that
    /// depends on one queued behind it. Run on the caller, the add waits for that dependency, which waits for the
    /// slot the caller holds: for ever. The policy's contract says such an add throws `queueFull`.
    @Test func callerRunsFromOwnQueueDoesNotWaitForADependencyQueuedBehindIt() throws {
        let queue = try SpindleOperationQueue(name: "rb-cr", maxConcurrentOperationCount: 1, capacity: 2,
                                              whenFull: .callerRuns)
        let queued = qtNamed("queued")
        let added = qtNamed("added")
        try added.addDependency(queued)
        let outcome = QTLog<String>()
        let done = QTGate()
        let adder = qtNamed("adder") {
            do {
                try queue.addOperation(added)
                outcome.append("added")
            } catch {
                outcome.append("\(error)")
            }
            done.open()
        }
        queue.isSuspended = true
        try queue.addOperation(adder)
        try queue.addOperation(queued)  // the queue is full now (2 of 2)
        queue.isSuspended = false
        let returned = done.wait(seconds: 10)
        #expect(returned, "the caller-runs add waited for an operation queued behind the caller's own slot")
        if !returned {
            queue.maxConcurrentOperationCount = 2  // unsticks it: `queued` gets a slot
            #expect(done.wait(seconds: 10))
        }
        qtDrain(queue)
        #expect(outcome.all == [SpindleError.queueFull(name: "rb-cr", capacity: 2).description])
        #expect(!added.isFinished && !added.isCancelled, "the refused operation was not left as it was")
    }

    /// A child of a group adds, to a full `.callerRuns` queue, an operation that depends on the group. Run on the
    /// caller, `runOnCaller` waits for the group (`try?` swallows `waitOnOwnGroup`), `start()` throws
    /// `operationNotReady`, and it loops: a busy spin for ever (the group waits for the spinning child).
    @Test func callerRunsOfAnOperationWaitingForTheCallersGroupDoesNotSpin() throws {
        let bounded = try SpindleOperationQueue(name: "rb-cr-group", maxConcurrentOperationCount: 1, capacity: 1,
                                                whenFull: .callerRuns)
        let release = QTGate()
        try bounded.addOperation(qtNamed("blocker") { release.wait() })  // full (1 of 1) until released
        let follow = MisuseCountingStartOp()
        let outcome = QTLog<String>()
        let done = QTGate()
        let child = qtNamed("child") {
            do {
                try bounded.addOperation(follow)
                outcome.append("added")
            } catch {
                outcome.append("\(error)")
            }
            done.open()
        }
        let group = try SpindleGroupOperation(operations: [child], pool: nil)
        try follow.addDependency(group)
        let outer = SpindleOperationQueue(name: "rb-cr-outer")
        try outer.addOperation(group)
        let returned = done.wait(seconds: 10)
        #expect(returned, "the caller-runs add spun waiting for the group its caller is a child of")
        #expect(follow.starts.count <= 1, "start() called \(follow.starts.count) times while the add spun")
        if !returned {
            follow.cancel()  // unsticks it: a cancelled operation starts (and finishes unrun)
            #expect(done.wait(seconds: 10))
        }
        release.open()
        qtDrain(outer)
        qtDrain(bounded)
        #expect(outcome.all == [SpindleError.queueFull(name: "rb-cr-group", capacity: 1).description])
    }

    /// An empty batch on a full bounded queue has nothing to fit: it returns at once whatever the policy. It
    /// used to wait behind the blocked producers (`.block`) and be refused (`.reject`).
    @Test func anEmptyBatchOnAFullQueueReturnsAtOnce() throws {
        let queue = try SpindleOperationQueue(name: "rb-empty", maxConcurrentOperationCount: 1, capacity: 1,
                                              whenFull: .block)
        queue.isSuspended = true
        try queue.addOperation(qtNamed("held"))  // full
        let producer = try SpindleThread.spawnJoinable(name: "rb-producer") {
            try? queue.addOperation(qtNamed("waiting"))
        }
        btWaitForBlockedProducers(queue, 1)
        let done = QTGate()
        let adder = try SpindleThread.spawnJoinable(name: "rb-empty-adder") {
            try? queue.addOperations([])
            done.open()
        }
        let returned = done.wait(seconds: 10)
        #expect(returned, "an empty batch waited behind a blocked producer")
        try queue.setCapacity(1, whenFull: .reject)
        #expect(throws: Never.self) { try queue.addOperations([]) }
        queue.isSuspended = false
        try producer.join()
        try adder.join()
        qtDrain(queue)
    }

    // MARK: - Deadlines

    /// A deadline armed before an add that a bounded queue refuses: the operation is dropped by its owner, but the
    /// timer's heap holds it (and everything its block captured) until the deadline, an hour here.
    @Test func refusedOperationWithADeadlineIsFreedWhenDropped() throws {
        let queue = try SpindleOperationQueue(name: "rb-deadline", maxConcurrentOperationCount: 1, capacity: 1,
                                              whenFull: .reject)
        queue.isSuspended = true
        try queue.addOperation(qtNamed("held"))
        var op: SpindleBlockOperation? = qtNamed("refused")
        weak let weakOp = op
        op!.cancel(after: .seconds(3600))
        #expect(throws: SpindleError.self) { try queue.addOperation(op!) }
        op = nil
        #expect(qtWaitUntil(seconds: 5) { weakOp == nil }, "the refused operation is still alive")
        queue.isSuspended = false
        qtDrain(queue)
    }

    // MARK: - Retry

    /// An attempt runs inside its retry, on the retry's thread: waiting there for the retry waits for itself.
    /// Groups refuse the same wait from a child (`waitOnOwnGroup`); a retry's attempt just blocks (here until the
    /// 3 s timeout; without one, for ever).
    @Test func attemptWaitingForItsRetryIsRefused() throws {
        let box = UnguardedBox<SpindleRetryOperation?>(nil)
        let outcome = QTLog<String>()
        let retry = try SpindleRetryOperation(maxAttempts: 1, backoff: .immediately) { _ in
            SpindleBlockOperation {
                do {
                    let finished = try box.value!.waitUntilFinished(timeout: .seconds(3))
                    outcome.append("returned \(finished)")
                } catch {
                    outcome.append("threw \(error)")
                }
            }
        }
        box.value = retry
        let queue = SpindleOperationQueue(name: "rb-retry-self")
        try queue.addOperation(retry)
        #expect(try retry.waitUntilFinished(timeout: .seconds(20)))
        qtDrain(queue)
        #expect(outcome.all == ["threw \(SpindleError.waitOnSelf(name: retry.displayName))"])
    }
}

/// Counts the calls of `start()` (the queue's, or a caller-runs loop's).
final class MisuseCountingStartOp: SpindleOperation, @unchecked Sendable {
    let starts = QTCounter()
    override func start() throws {
        self.starts.increment()
        try super.start()
    }
}
