import Glibc
import Synchronization
import Testing

@testable import Spindle

/// A review of the queue's lifecycle and idle/wake unit (2026-11-26): each test failed before its fix.
@Suite("Review of the queue lifecycle", .timeLimit(.minutes(2))) struct QueueLifecycleReviewTests {
    // MARK: - R1: waitUntilAllOperationsAreFinished from user code a worker runs outside an operation

    /// What the deinit saw.
    final class Seen: @unchecked Sendable {
        let lock = QTLock()
        var onWorker = false
        var terminationWait = "not called"
        var drainWait = "not called"
        var bRanDuringWait = false
        let done = QTGate()
    }

    /// Dies with its operation: its deinit runs where the queue drops its last reference to the operation.
    final class Canary: @unchecked Sendable {
        let queue: SpindleOperationQueue
        let seen: Seen
        init(_ queue: SpindleOperationQueue, _ seen: Seen) {
            self.queue = queue
            self.seen = seen
        }
        deinit {
            let onWorker = ThreadContext.current.workerOf === self.queue.core
            let b = QTFlag()
            // The same misuse through the two waits: wait for the queue this thread is a worker of.
            var termination = ""
            do { termination = "returned \(try self.queue.awaitTermination(timeout: .zero))" } catch {
                termination = "threw \(error)"
            }
            self.queue.addOperation { b.set() }
            var drain = ""
            do {
                drain = "returned \(try self.queue.waitUntilAllOperationsAreFinished(timeout: .seconds(3)))"
            } catch {
                drain = "threw \(error)"
            }
            self.seen.lock.withLock {
                self.seen.onWorker = onWorker
                self.seen.terminationWait = termination
                self.seen.drainWait = drain
                self.seen.bRanDuringWait = b.isSet
            }
            self.seen.done.open()
        }
    }

    /// An operation that owns a canary (not its block: a block is released inside `main`).
    final class Holder: SpindleOperation, @unchecked Sendable {
        let canary: Canary
        init(_ canary: Canary) {
            self.canary = canary
            super.init()
        }
        override func main() {}
    }

    @inline(never)
    func addHolder(_ queue: SpindleOperationQueue, _ seen: Seen) throws {
        try queue.addOperation(Holder(Canary(queue, seen)))
    }

    @Test(qtOwnThreadsOnly) func drainWaitFromAWorkersDeinitThrowsLikeTheTerminationWait() throws {
        let queue = try SpindleOperationQueue(name: "review-R1", maxConcurrentOperationCount: 1)
        let seen = Seen()
        // Added while suspended and let go here before it can run: the queue then holds its last reference, and
        // its worker drops it (else the adding thread may, when the worker finishes it before the add returns).
        queue.isSuspended = true
        try self.addHolder(queue, seen)
        queue.isSuspended = false
        #expect(seen.done.wait(), "the deinit ran")
        let (onWorker, termination, drain, bRan) = seen.lock.withLock {
            (seen.onWorker, seen.terminationWait, seen.drainWait, seen.bRanDuringWait)
        }
        #expect(onWorker, "the operation was freed on the queue's worker")
        #expect(termination.hasPrefix("threw"), "awaitTermination refuses: \(termination)")
        #expect(drain.hasPrefix("threw"), "waitUntilAllOperationsAreFinished should refuse too, got: \(drain); B ran: \(bRan)")
        qtDrain(queue)
    }

    // MARK: - R2: a start() from another thread racing the queue's own start

    /// Misuse: another thread calls `start()` on operations it added to a queue. Expected: a typed error
    /// (`operationEnqueued`/`operationExecuting`), the queue unchanged. The racer spins on each operation until the
    /// queue has claimed it; when it wins the window between `queueIsCallingStart()` and the worker's own
    /// `start()`, it runs the operation itself, and if that operation was one of the worker's reserved ones, the
    /// worker's `precondition(done, ...)` in `runNextUnlocking` kills the process.
    @Test(qtOwnThreadsOnly) func aStartRacingTheQueuesOwnStartIsRefused() throws {
        let queue = try SpindleOperationQueue(name: "review-R2", maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let hijacked = QTCounter()  // blocks run on the racing thread
        let ops = (0..<2000).map { _ in  // plain block operations: reservable
            SpindleBlockOperation { if SpindleThread.current.name.hasPrefix("review-racer") { hijacked.increment() } }
        }
        try queue.addOperations(ops)
        try runJoinableThreads(1, name: "review-racer", { _ in
            for op in ops {
                // A start() that returns has found it finished (the queue ran it) or ran it here (the bug).
                while !op.isExecuting && !op.isFinished {
                    do {
                        try op.start()
                        break
                    } catch {}
                }
            }
        }, beforeJoining: { queue.isSuspended = false })
        qtDrain(queue)
        #expect(hijacked.count == 0, "start() from another thread ran \(hijacked.count) operations the queue had taken")
    }

    // MARK: - R3: a valid but huge width

    /// `maxConcurrentOperationCount = Int.max` is a valid width (anything >= -1 is accepted, and stands for
    /// "unlimited"). Expected: the block runs. `reserveLocked` computes `limit * batchThresholdPerSlot`, which
    /// overflows.
    @Test func aQueueOfWidthIntMaxRunsABlock() throws {
        let queue = try SpindleOperationQueue(name: "review-R3", maxConcurrentOperationCount: Int.max)
        let ran = QTGate()
        queue.addOperation { ran.open() }
        #expect(ran.wait(), "the block ran")
        qtDrain(queue)
    }
}
