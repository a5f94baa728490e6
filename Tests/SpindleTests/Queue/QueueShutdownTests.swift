import Glibc
import Testing

@testable import Spindle

/// Issue 18: a queue's explicit shutdown (drain or cancel), the refusals after it, and the termination waits.
/// Operations and the test meet on `QTGate`s (POSIX semaphores) with generous deadlines; nothing sleeps.
@Suite struct QueueShutdownTests {
    /// An operation that counts its runs, and is cancelled-aware: it records whether it saw `isCancelled`.
    final class Probe: SpindleOperation, @unchecked Sendable {
        let runs = QTCounter()
        let completions = QTCounter()
        let gate: QTGate?
        let started: QTGate?
        let sawCancel = QTFlag()

        init(gate: QTGate? = nil, started: QTGate? = nil) {
            self.gate = gate
            self.started = started
            super.init()
            self.completionBlock = { [completions] in completions.increment() }
        }

        override func main() {
            self.runs.increment()
            self.started?.open()
            // Longer than any wait of the test: a test that never opens it fails on its own wait first. (An
            // expectation here would be recorded on a worker thread, outside the test; and under ThreadSanitizer
            // with the machine loaded, 10 s between the start and the test's `open` has been seen.)
            _ = gate?.wait(seconds: 6 * qtDeadline)
            if self.isCancelled { self.sawCancel.set() }
        }

        var ran: Int { self.runs.count }
        var completed: Int { self.completions.count }
    }

    /// The queue's threads are gone from its books: none in its loop, none to join.
    func workersJoined(_ queue: SpindleOperationQueue) -> Bool {
        queue.core.lock.withLock { queue.core.idle.threadCount == 0 && queue.core.idle.threads.isEmpty }
    }

    @Test func drainRunsEverythingAcceptedAndJoinsTheWorkers() throws {
        let queue = try SpindleOperationQueue(name: "drain", maxConcurrentOperationCount: 2)
        let gate = QTGate()
        let started = QTGate()
        let blockers = (0..<2).map { _ in Probe(gate: gate, started: started) }
        let queued = (0..<40).map { _ in Probe() }
        for op in blockers + queued { try queue.addOperation(op) }
        #expect(started.wait() && started.wait(), "both slots taken")
        queue.shutdown(.drain)
        #expect(queue.isShutDown && !queue.isTerminated)
        #expect(try queue.awaitTermination(timeout: .zero) == false, "two operations still hold their slots")
        gate.open(2)
        #expect(try queue.awaitTermination(timeout: .seconds(qtDeadline)))
        #expect(queue.isTerminated)
        for op in blockers + queued {
            #expect(op.ran == 1 && op.completed == 1 && op.isFinished && !op.isCancelled)
        }
        #expect(self.workersJoined(queue))
        #expect(queue.operationCount == 0)
    }

    @Test func cancelFinishesQueuedWorkCancelledWithCompletionsAndTellsTheRunningOne() throws {
        let queue = try SpindleOperationQueue(name: "cancel", maxConcurrentOperationCount: 1)
        let gate = QTGate()
        let started = QTGate()
        let running = Probe(gate: gate, started: started)
        let queued = (0..<20).map { _ in Probe() }
        try queue.addOperation(running)
        for op in queued { try queue.addOperation(op) }
        #expect(started.wait())
        queue.shutdown(.cancel)
        gate.open()
        #expect(try queue.awaitTermination(timeout: .seconds(qtDeadline)))
        #expect(running.ran == 1 && running.sawCancel.isSet && running.completed == 1)
        for op in queued { #expect(op.ran == 0 && op.isCancelled && op.isFinished && op.completed == 1) }
        #expect(self.workersJoined(queue))
    }

    /// The operation after `CancelHook`: says when it was touched (started or cancelled).
    final class TouchProbe: SpindleOperation, @unchecked Sendable {
        let touched = QTGate()
        let runs = QTCounter()
        override func main() {
            self.runs.increment()
            self.touched.open()
        }
        override func cancel() {
            super.cancel()
            self.touched.open()
        }
    }

    /// Runs until cancelled; its cancellation (the shutdown's first) holds the shutdown's cancel loop until the
    /// worker has touched the next operation, so the worker always gets there before the loop does.
    final class CancelHook: SpindleOperation, @unchecked Sendable {
        let started = QTGate()
        let next: TouchProbe
        let hooked = QTFlag()
        init(next: TouchProbe) {
            self.next = next
            super.init()
        }
        override func main() {
            self.started.open()
            let deadline = qtMonotonicSeconds() + qtDeadline
            while !self.isCancelled && qtMonotonicSeconds() < deadline {}
        }
        override func cancel() {
            super.cancel()
            if !self.hooked.isSet {
                self.hooked.set()
                #expect(self.next.touched.wait(), "the worker never took the next operation")
            }
        }
    }

    @Test func afterShutdownCancelNothingStartsUncancelledEvenWhenTheRunningOneReturnsAtOnce() throws {
        let queue = try SpindleOperationQueue(name: "cancel-race", maxConcurrentOperationCount: 1)
        let next = TouchProbe()
        let running = CancelHook(next: next)
        try queue.addOperations([running, next])
        #expect(running.started.wait())
        queue.shutdown(.cancel)  // cancels `running`, which returns; the worker takes `next` meanwhile
        #expect(try queue.awaitTermination(timeout: .seconds(qtDeadline)))
        #expect(next.runs.count == 0 && next.isCancelled && next.isFinished, "started uncancelled")
    }

    @Test func cancelAfterDrainEscalatesAndRepeatsAreNoOps() throws {
        let queue = try SpindleOperationQueue(name: "escalate", maxConcurrentOperationCount: 1)
        let gate = QTGate()
        let started = QTGate()
        let first = Probe(gate: gate, started: started)
        let rest = (0..<10).map { _ in Probe() }
        try queue.addOperation(first)
        for op in rest { try queue.addOperation(op) }
        #expect(started.wait())
        queue.shutdown(.drain)
        queue.shutdown(.drain)  // a repeat: nothing changes
        #expect(rest.allSatisfy { !$0.isCancelled }, "draining cancels nothing")
        queue.shutdown(.cancel)  // the escalation
        queue.shutdown(.cancel)
        queue.shutdown(.drain)  // weaker than what is in force: ignored
        gate.open()
        #expect(try queue.awaitTermination(timeout: .seconds(qtDeadline)))
        #expect(first.ran == 1)
        for op in rest { #expect(op.ran == 0 && op.isCancelled && op.completed == 1) }
        queue.shutdown(.cancel)  // after termination: still a no-op
        #expect(queue.isTerminated)
    }

    @Test func everyAddAfterShutdownIsRefusedAndLeavesTheOperationUntouched() throws {
        let queue = try SpindleOperationQueue(name: "closed", maxConcurrentOperationCount: 2)
        queue.shutdown()
        let refused = qtNamed("refused")
        qtExpectError(.queueShutDown(name: "closed")) { try queue.addOperation(refused) }
        let barrier = qtNamed("barrier")
        barrier.isBarrier = true
        qtExpectError(.queueShutDown(name: "closed")) { try queue.addOperation(barrier) }
        let batch = [qtNamed("b1"), qtNamed("b2")]
        qtExpectError(.queueShutDown(name: "closed")) { try queue.addOperations(batch) }
        qtExpectError(.queueShutDown(name: "closed")) { try queue.addOperation(qtNamed("timed"), timeout: .seconds(1)) }
        for op in [refused, barrier] + batch {
            #expect(op.isReady && !op.isExecuting && !op.isFinished && !op.isCancelled, "untouched")
        }
        // Untouched means usable: another queue runs them.
        let other = SpindleOperationQueue(name: "other")
        try other.addOperations([refused] + batch, waitUntilFinished: true)
        #expect(refused.isFinished && batch.allSatisfy { $0.isFinished && !$0.isCancelled })

        // The non-throwing forms: the new operation comes back finished as cancelled; its block never runs.
        let ran = QTFlag()
        let blockOp = queue.addOperation { ran.set() }
        #expect(blockOp.isFinished && blockOp.isCancelled)
        let barrierOp = queue.addBarrierBlock { ran.set() }
        #expect(barrierOp.isFinished && barrierOp.isCancelled)
        #expect(!ran.isSet)
        #expect(queue.operationCount == 0)
        #expect(try queue.awaitTermination(timeout: .seconds(qtDeadline)))
    }

    @Test func aBlockedProducerIsRefusedByTheShutdown() throws {
        let queue = try SpindleOperationQueue(name: "bounded", maxConcurrentOperationCount: 1, capacity: 1)
        let gate = QTGate()
        let started = QTGate()
        let holder = Probe(gate: gate, started: started)
        try queue.addOperation(holder)
        #expect(started.wait())
        let waiting = qtNamed("waiting")
        let outcome = QTLog<String>()
        let producerDone = QTGate()
        try SpindleThread.detach(name: "producer") {
            do {
                try queue.addOperation(waiting)  // full, policy .block: waits for room
                outcome.append("added")
            } catch {
                outcome.append("\(error)")
            }
            producerDone.open()
        }
        #expect(qtWaitUntil { queue.snapshot().blockedProducers == 1 }, "the producer is blocked")
        queue.shutdown(.drain)
        #expect(producerDone.wait())
        #expect(outcome.all == [SpindleError.queueShutDown(name: "bounded").description])
        #expect(waiting.isReady && !waiting.isFinished && !waiting.isCancelled, "given back untouched")
        gate.open()
        #expect(try queue.awaitTermination(timeout: .seconds(qtDeadline)))
        #expect(holder.ran == 1)
    }

    @Test func awaitingFromOneOfTheQueuesOwnOperationsThrows() throws {
        let queue = try SpindleOperationQueue(name: "self-await", maxConcurrentOperationCount: 2)
        let errors = QTLog<String>()
        let done = QTGate()
        let op = SpindleBlockOperation {
            do { try queue.awaitTermination() } catch { errors.append("main: \(error)") }
        }
        op.completionBlock = {
            do { _ = try queue.awaitTermination(timeout: .seconds(1)) } catch { errors.append("completion: \(error)") }
            done.open()
        }
        try queue.addOperation(op)
        #expect(done.wait())
        let expected = SpindleError.waitOnOwnQueue(name: "self-await").description
        #expect(errors.all.sorted() == ["completion: \(expected)", "main: \(expected)"])
        queue.shutdown()
        #expect(try queue.awaitTermination(timeout: .seconds(qtDeadline)))
    }

    @Test func shutdownFromInsideAnOperationDrainsTheRest() throws {
        let queue = try SpindleOperationQueue(name: "inside", maxConcurrentOperationCount: 1)
        let later = (0..<5).map { _ in Probe() }
        let refusedInside = QTLog<String>()
        let first = SpindleBlockOperation {
            queue.shutdown()
            do { try queue.addOperation(qtNamed("late")) } catch { refusedInside.append("\(error)") }
        }
        try queue.addOperations([first] + later)  // one batch: all admitted before the first can run
        #expect(try queue.awaitTermination(timeout: .seconds(qtDeadline)))
        #expect(later.allSatisfy { $0.ran == 1 })
        #expect(refusedInside.all == [SpindleError.queueShutDown(name: "inside").description])
    }

    @Test func waitersBeforeTheShutdownAndSeveralAtOnceAllReturn() throws {
        let queue = try SpindleOperationQueue(name: "waiters", maxConcurrentOperationCount: 2)
        for _ in 0..<10 { try queue.addOperation(Probe()) }
        #expect(try queue.awaitTermination(timeout: .zero) == false, "not shut down: never terminates")
        let returned = QTGate()
        let results = QTLog<Bool>()
        for i in 0..<4 {
            try SpindleThread.detach(name: "waiter\(i)") {
                results.append((try? queue.awaitTermination(timeout: .seconds(qtDeadline))) ?? false)
                returned.open()
            }
        }
        queue.shutdown()
        for _ in 0..<4 { #expect(returned.wait()) }
        #expect(results.all == [true, true, true, true])
        #expect(self.workersJoined(queue))
    }

    @Test func anEmptyOrNeverUsedQueueTerminatesAtOnce() throws {
        let unused = SpindleOperationQueue(name: "unused")
        unused.shutdown()
        #expect(unused.isTerminated)
        #expect(try unused.awaitTermination(timeout: .zero))
        let used = SpindleOperationQueue(name: "used")
        try used.addOperations([Probe(), Probe()], waitUntilFinished: true)
        used.shutdown(.cancel)
        #expect(try used.awaitTermination(timeout: .seconds(qtDeadline)))
        #expect(self.workersJoined(used))
    }

    @Test func aSuspendedQueueIsResumedByTheShutdownAndStaysResumed() throws {
        let queue = try SpindleOperationQueue(name: "suspended", maxConcurrentOperationCount: 2)
        queue.isSuspended = true
        let ops = (0..<8).map { _ in Probe() }
        for op in ops { try queue.addOperation(op) }
        queue.shutdown(.drain)
        queue.isSuspended = true  // ignored: what was accepted must run
        #expect(!queue.isSuspended)
        #expect(try queue.awaitTermination(timeout: .seconds(qtDeadline)))
        #expect(ops.allSatisfy { $0.ran == 1 })
    }

    @Test func aRunLoopServedQueueTerminatesWithoutThreads() throws {
        let loopThread = try SpindleRunLoopThread(name: "served-shutdown")
        defer { try? loopThread.shutdown() }
        let queue = SpindleOperationQueue(name: "served", servedBy: loopThread.runLoop)
        let ops = (0..<6).map { _ in Probe() }
        for op in ops { try queue.addOperation(op) }
        queue.shutdown(.drain)
        #expect(try queue.awaitTermination(timeout: .seconds(qtDeadline)))
        #expect(ops.allSatisfy { $0.ran == 1 })
        qtExpectError(.queueShutDown(name: "served")) { try queue.addOperation(Probe()) }
    }

    @Test func addsRacingTheShutdownAreAcceptedAndRunOrRefusedUntouched() throws {
        for round in 0..<20 {
            let queue = try SpindleOperationQueue(name: "race\(round)", maxConcurrentOperationCount: 2)
            let adders = 3
            let perAdder = 300
            let ops = SpindleLockedValue<[(Probe, Bool)]>([])
            let go = QTGate()
            let finished = QTGate()
            for a in 0..<adders {
                try SpindleThread.detach(name: "adder\(a)") {
                    #expect(go.wait())
                    var mine: [(Probe, Bool)] = []
                    for _ in 0..<perAdder {
                        let op = Probe()
                        do {
                            try queue.addOperation(op)
                            mine.append((op, true))
                        } catch SpindleError.queueShutDown {
                            mine.append((op, false))
                        } catch {
                            Issue.record("unexpected \(error)")
                        }
                    }
                    ops.withLockedValue { $0 += mine }
                    finished.open()
                }
            }
            go.open(adders)
            queue.shutdown(round % 2 == 0 ? .drain : .cancel)
            for _ in 0..<adders { #expect(finished.wait()) }
            #expect(try queue.awaitTermination(timeout: .seconds(qtDeadline)))
            for (op, accepted) in ops.value {
                if accepted {
                    #expect(op.isFinished && op.completed == 1 && op.ran <= 1)
                    if round % 2 == 0 { #expect(op.ran == 1, "drain runs every accepted operation") }
                } else {
                    #expect(op.ran == 0 && op.isReady && !op.isFinished && !op.isCancelled && op.completed == 0)
                }
            }
            #expect(ops.value.count == adders * perAdder)
        }
    }

    @Test func aQueueReleasedAfterItsShutdownIsFreed() throws {
        weak var weakQueue: SpindleOperationQueue?
        do {
            let queue = SpindleOperationQueue(name: "released")
            weakQueue = queue
            for _ in 0..<10 { try queue.addOperation(Probe()) }
            queue.shutdown()
        }
        #expect(qtWaitUntil { weakQueue == nil }, "the queue is freed once its work is through")
    }

    // MARK: - Async

    @Test func awaitTerminationAsyncReturnsAfterTheDrainAndHonoursCancellation() async throws {
        let queue = try SpindleOperationQueue(name: "async", maxConcurrentOperationCount: 2)
        let gate = QTGate()
        let started = QTGate()
        let holder = Probe(gate: gate, started: started)
        try queue.addOperation(holder)
        #expect(started.wait())
        #expect(try await queue.awaitTermination(timeout: .milliseconds(1)) == false, "not shut down yet")
        // A cancelled waiter ends its wait and changes nothing.
        let cancelled = Task { try await queue.awaitTermination() }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        queue.shutdown()
        gate.open()
        try await queue.awaitTermination()
        #expect(queue.isTerminated && holder.ran == 1 && self.workersJoined(queue))
        await #expect(throws: SpindleError.self) { _ = try await queue.run { 1 } }
    }

    @Test func theAsyncTimedWaitOnATerminatedQueueReturnsTrueEvenWithAZeroTimeout() async throws {
        let queue = SpindleOperationQueue(name: "terminated")
        queue.shutdown()
        for _ in 0..<100 {
            #expect(try await queue.awaitTermination(timeout: .zero), "a terminated queue never times out")
        }
    }

    @Test(qtOwnThreadsOnly) func aWaiterResumedOnTheLastWorkerDoesNotJoinItself() async throws {
        let queue = try SpindleOperationQueue(name: "resumed-on-worker", maxConcurrentOperationCount: 1)
        let gate = QTGate()
        let started = QTGate()
        try queue.addOperation(Probe(gate: gate, started: started))
        #expect(started.wait())
        let workers = queue.core.lock.withLock { queue.core.idle.threads }
        #expect(workers.count == 1)
        queue.shutdown()
        // Its jobs are refused by the shut-down queue and run on the global concurrent executor (they once ran
        // where they were enqueued: the resumption on the worker that signals the termination, after that worker
        // left its loop). Polled with yields: a blocked cooperative thread could be the one that job needs.
        let waiter = Task(executorPreference: queue.taskExecutor) { try await queue.awaitTermination() }
        #expect(await atEventually { queue.core.lock.withLock { !queue.core.terminationWaiters.isEmpty } }, "waiting")
        gate.open()
        try await waiter.value
        for worker in workers {
            // Joined, or detached by itself; a join that succeeds here means nobody joined it.
            var outcome = "joined now"
            do { try worker.join() } catch { outcome = "\(error)" }
            #expect(outcome != "joined now", "the worker was left joinable")
        }
    }

    @Test func awaitTerminationAsyncFromTheQueuesOwnRunThrows() async throws {
        let queue = try SpindleOperationQueue(name: "async-self", maxConcurrentOperationCount: 2)
        let error = try await queue.run { () -> String in
            do { try queue.awaitTermination() } catch { return "\(error)" }
            return "no error"
        }
        #expect(error == SpindleError.waitOnOwnQueue(name: "async-self").description)
        queue.shutdown()
        try await queue.awaitTermination()
    }

    /// A huge timeout (beyond Int64.max seconds, where `Task.sleep` traps) waits without a timeout.
    @Test func anAsyncTerminationWaitWithAHugeTimeoutSaturates() async {
        await #expect(processExitsWith: .success) {
            qtStartExitTestWatchdog(seconds: 3 * qtDeadline)  // a hang anywhere below fails (exit 9)
            let queue = SpindleOperationQueue(name: "huge-termination-timeout")
            let release = try! SpindleSemaphore(value: 0)
            queue.addOperation { release.wait() }
            queue.shutdown(.drain)
            async let terminated = queue.awaitTermination(timeout: .seconds(Int64.max) * 2)
            // The queue terminates only once the wait is under way (before, the timeout's sleep trapped at once).
            // Bounded: a wait that never gets under way (returns or throws at once) fails instead of hanging.
            let end = SpindleDeadline.after(.seconds(qtDeadline))
            while queue.core.lock.withLock({ queue.core.terminationWaiters.isEmpty }) {
                if end.hasPassed { exit(4) }
                await Task.yield()
            }
            release.signal()
            exit(try await terminated ? 0 : 3)
        }
    }
}
