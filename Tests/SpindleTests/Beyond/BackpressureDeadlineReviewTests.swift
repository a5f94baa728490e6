import Synchronization
import Testing

@testable import Spindle

/// Review of bounded queues, backpressure and deadlines (seventh round, 2026-11-26): each test failed (or hung,
/// bounded by a deadline) on the code it was written against. A test that detects a hang unsticks it afterwards, so
/// the run goes on.
@Suite(.serialized) struct BackpressureDeadlineReviewTests {
    /// A suspended queue of width 1 holding `count` named operations: full when `count == capacity`.
    func fullQueue(_ name: String, capacity: Int, policy: SpindleFullQueuePolicy, holding count: Int) throws
        -> SpindleOperationQueue
    {
        let queue = try SpindleOperationQueue(name: name, maxConcurrentOperationCount: 1, capacity: capacity,
                                              whenFull: policy)
        queue.isSuspended = true
        for i in 0..<count { try queue.addOperation(qtNamed("held\(i)")) }
        return queue
    }

    // MARK: - A condition's produced dependency is added with the queue's policy, not the add's
    // (The README listed this as a known limit; a produced dependency now joins past the capacity.)

    /// `addOperation(_:timeout:)`: "waiting until deadline for room … throws queueFull if the deadline passed
    /// first". For an operation with a condition that produces a dependency, `beginBoundedAdd` first lets the
    /// conditions produce their dependencies (`produceGateDependenciesLocked` → `gateClaimed` → `adopt`), and
    /// `adopt` adds the dependency with a plain `queue.addOperation`, i.e. with the queue's policy: on a full
    /// `.block` queue that add blocks with no deadline at all, so the timed add never returns while the queue
    /// stays full.
    @Test(.timeLimit(.minutes(1))) func aTimedAddOfAnOperationWithAProducingConditionReturnsByItsDeadline() throws {
        let queue = try self.fullQueue("bd-timed-gated", capacity: 1, policy: .block, holding: 1)
        let produced = CTOp("produced")
        let gated = CTOp("gated")
        try gated.addCondition(CTCondition("produces", produce: { _ in produced }))
        let outcome = QTLog<String>()
        let producer = try BTThread("bd-timed-gated") {
            do {
                try queue.addOperation(gated, timeout: .milliseconds(200))
                outcome.append("added")
            } catch {
                outcome.append("\(error)")
            }
        }
        let returned = producer.join(seconds: 5)
        #expect(returned, "a timed add with a 200 ms deadline had not returned after 5 s (blocked in the add of its condition's dependency)")
        if !returned {
            queue.isSuspended = false  // unsticks it: room for the dependency, then the deadline has long passed
            #expect(producer.join())
        } else {
            #expect(outcome.all == [SpindleError.queueFull(name: "bd-timed-gated", capacity: 1).description])
        }
        queue.isSuspended = false
        qtDrain(queue)
    }

    /// `addOperationWhenRoom`: "suspending the calling task (never blocking its thread) … CancellationError if the
    /// task was cancelled before room was granted". The same path blocks the task's thread in the dependency's
    /// plain add, where a cancellation of the task is never seen.
    @Test(.timeLimit(.minutes(1))) func anAsyncAddOfAnOperationWithAProducingConditionHonoursCancellation() async throws {
        // Async throughout (no cooperative thread blocked): with the strict cooperative pool (one thread), a test
        // that blocked its own thread waiting for the task would starve the task.
        let queue = try self.fullQueue("bd-async-gated", capacity: 1, policy: .block, holding: 1)
        let produced = CTOp("produced")
        let gated = CTOp("gated")
        let condition = CTCondition("produces", produce: { _ in produced })
        try gated.addCondition(condition)
        let outcome = QTLog<String>()
        let done = QTFlag()
        let task = Task.detached {
            do {
                try await queue.addOperationWhenRoom(gated)
                outcome.append("added")
            } catch is CancellationError {
                outcome.append("cancelled")
            } catch {
                outcome.append("\(error)")
            }
            done.set()
        }
        #expect(await atEventually(seconds: qtDeadline) {
            condition.produced.count == 1 && queue.snapshot().blockedProducers == 1
        })
        task.cancel()
        let answered = await atEventually(seconds: 5) { done.isSet }
        #expect(answered, "a cancelled addOperationWhenRoom had not returned after 5 s (its thread is blocked in the add of its condition's dependency)")
        if !answered {
            queue.isSuspended = false  // unsticks it
            #expect(await atEventually(seconds: qtDeadline) { done.isSet })
        } else {
            #expect(outcome.all == ["cancelled"])
        }
        queue.isSuspended = false
        await task.value
        qtDrain(queue)
    }

    /// The same on a `.reject` queue: the timed add waits for room "whatever its policy", but the dependency its
    /// condition produces is added with the queue's policy and refused at once (`queueFull`); that refusal becomes
    /// the gate's `produceFailure`, so once room comes and the operation is admitted, it fails its condition with
    /// the queue's `queueFull` and `main` never runs, although the add itself succeeded.
    @Test(.timeLimit(.minutes(1))) func aTimedAddOnARejectingQueueDoesNotFailTheOperationsCondition() throws {
        let queue = try self.fullQueue("bd-reject-gated", capacity: 2, policy: .reject, holding: 2)
        let produced = CTOp("produced")
        let gated = CTOp("gated")
        try gated.addCondition(CTCondition("produces", produce: { _ in produced }))
        let outcome = QTLog<String>()
        let producer = try BTThread("bd-reject-gated") {
            do {
                try queue.addOperation(gated, timeout: .seconds(qtDeadline))
                outcome.append("added")
            } catch {
                outcome.append("\(error)")
            }
        }
        btWaitForBlockedProducers(queue, 1)
        queue.isSuspended = false
        #expect(producer.join())
        #expect(outcome.all == ["added"])
        #expect(ctFinish(gated))
        qtDrain(queue)
        #expect(ctConditionFailure(gated) == nil,
                "the operation failed its condition with \(String(describing: ctConditionFailure(gated)?.underlying))")
        #expect(gated.runs.count == 1, "main never ran although the timed add succeeded")
        #expect(produced.runs.count == 1, "the condition's dependency was refused by the queue's policy")
    }

    // MARK: - A timed add with no real deadline from the queue's own operation

    /// The plain add from one of the queue's own operations throws `waitOnOwnQueue` (it may hold the room it waits
    /// for), and so does `addOperationWhenRoom` from its own async operation. The timed form skips that check
    /// (`checkOwnQueue: deadline == nil` in `addBounded`), which is harmless for a short deadline but not for
    /// `.distantFuture` (or a `Duration` that saturates to it): on a queue of width 1 and capacity 1 the operation
    /// waits for the room it holds itself, for ever.
    @Test(.timeLimit(.minutes(1))) func aTimedAddWithADistantDeadlineFromTheQueuesOwnOperationDoesNotWaitForItself()
        throws
    {
        let queue = try SpindleOperationQueue(name: "bd-own-timed", maxConcurrentOperationCount: 1, capacity: 1,
                                              whenFull: .block)
        let outcome = QTLog<String>()
        let done = QTGate()
        let inner = qtNamed("inner")
        let outer = qtNamed("outer") {
            do {
                try queue.addOperation(inner, until: .distantFuture)
                outcome.append("added")
            } catch {
                outcome.append("\(error)")
            }
            done.open()
        }
        try queue.addOperation(outer)
        let answered = done.wait(seconds: 5)
        #expect(answered, "the timed add from the queue's own operation waits for the room it holds (for ever)")
        if !answered {
            try queue.setCapacity(2)  // unsticks it: room for the inner operation
            #expect(done.wait(seconds: qtDeadline))
        } else {
            #expect(outcome.all == [SpindleError.waitOnOwnQueue(name: "bd-own-timed").description])
        }
        qtDrain(queue)
    }

    // MARK: - callerRuns past a barrier

    /// `addBarrierBlock`: "operations added after it start only once it has returned", and the barrier runs
    /// "alone". On a full `.callerRuns` queue an operation added after a pending barrier runs at once on the adding
    /// thread, before the barrier has run and while it may run (a reader running beside the barrier's writer).
    @Test(.timeLimit(.minutes(1))) func callerRunsDoesNotRunAnOperationAddedAfterABarrierBeforeTheBarrier() throws {
        let queue = try SpindleOperationQueue(name: "bd-barrier-cr", maxConcurrentOperationCount: 2, capacity: 1,
                                              whenFull: .callerRuns)
        let release = QTGate()
        let started = QTGate()
        try queue.addOperation(qtNamed("first") {
            started.open()
            _ = release.wait(seconds: qtDeadline)
        })
        #expect(started.wait())
        let barrierRan = QTFlag()
        let barrier = queue.addBarrierBlock { barrierRan.set() }
        let ranBeforeBarrier = QTFlag()
        let after = qtNamed("after") { if !barrierRan.isSet { ranBeforeBarrier.set() } }
        // Run on a thread of its own, so a wrong wait here cannot hang the test.
        let outcome = QTLog<String>()
        let adder = try BTThread("bd-barrier-cr") {
            do { try queue.addOperation(after) } catch { outcome.append("\(error)") }
        }
        let addReturned = adder.join(seconds: 2)
        release.open()
        #expect(ctFinish(barrier))
        if !addReturned { #expect(adder.join()) }
        qtDrain(queue)
        #expect(!ranBeforeBarrier.isSet, "an operation added after a barrier ran (on the caller) before the barrier")
        // It cannot run on the caller now: refused as when it cannot run there for any other reason.
        #expect(outcome.all == [SpindleError.queueFull(name: "bd-barrier-cr", capacity: 1).description])
        #expect(!after.isFinished && !after.isExecuting)
    }

    // MARK: - A worker doing its bookkeeping adds to its own full queue

    /// A task on the queue's own task executor awaits room (`addOperationWhenRoom`): it suspends, its job finishes,
    /// and the worker that ran the job grants the room to it (admitting `x`) and takes `x`. Then, outside any
    /// operation, it releases the previous batch (`perform(&worker.pending)` in `runNextUnlocking`): the granted
    /// producer's semaphore resumes the task, whose next job goes through `SpindleTaskExecutor.enqueue` →
    /// `addOperation` on the same full `.block` queue. `isOwnQueueOfCallingThread` does not see the worker there
    /// (`context.queue` is set only around the operation it runs, `workerOf` is not asked), so the worker blocks
    /// waiting for the room held by `x`, which only it can run: the queue and the task hang for ever.
    @Test(.timeLimit(.minutes(1))) func anAsyncAddFromATaskOnTheQueuesExecutorDoesNotDeadlockItsWorker() async throws {
        // Async throughout: a cooperative thread blocked here could be the one the task needs to start.
        let queue = try SpindleOperationQueue(name: "bd-exec-room", maxConcurrentOperationCount: 1, capacity: 1,
                                              whenFull: .block)
        let outcome = QTLog<String>()
        let done = QTFlag()
        let x = qtNamed("x")
        let executor = queue.taskExecutor
        let task = Task.detached {
            await withTaskExecutorPreference(executor) {
                do {
                    try await queue.addOperationWhenRoom(x)
                    outcome.append("added")
                } catch {
                    outcome.append("\(error)")
                }
            }
            done.set()
        }
        let answered = await atEventually(seconds: 5) { done.isSet }
        #expect(answered, "the queue's worker blocked adding the resumed task's job to its own full queue")
        if !answered {
            // The task's own add was granted (`x` is a member, taken by the worker, not started): the producer
            // now blocked is the worker, adding the task's next job.
            #expect(outcome.all.isEmpty && queue.operations.contains { $0 === x } && !x.isExecuting && !x.isFinished)
            #expect(queue.snapshot().blockedProducers == 1, "the worker waits as a producer")
            try queue.setCapacity(nil)  // unsticks it
            #expect(await atEventually(seconds: qtDeadline) { done.isSet })
        }
        await task.value
        #expect(outcome.all == ["added"])
        #expect(ctFinish(x))
        qtDrain(queue)
    }

    // MARK: - The deadline thread blocked by a full queue's task executor

    /// Deadlines fire on one shared thread. An async operation's deadline cancels its task there; the task waits
    /// on a `SpindleSemaphore` (async), whose cancellation handler resumes it at once, on that thread; the task
    /// prefers a full `.block` queue's task executor, so `SpindleTaskExecutor.enqueue` → `addOperation` blocks the
    /// deadline thread until that queue has room. Meanwhile no other deadline in the process fires.
    @Test(.timeLimit(.minutes(1))) func aDeadlineResumingATaskOnAFullQueueDoesNotStallOtherDeadlines() async throws {
        // Async throughout: a cooperative thread blocked here could be the one the operation's task needs.
        let full = try SpindleOperationQueue(name: "bd-full-exec", maxConcurrentOperationCount: 1, capacity: 1,
                                             whenFull: .block)
        let runner = SpindleOperationQueue(name: "bd-runner")
        let sem = try SpindleSemaphore(value: 0)
        let entered = QTFlag()
        let executor = full.taskExecutor
        let op = SpindleAsyncOperation {
            await withTaskExecutorPreference(executor) {
                entered.set()
                try? await sem.wait()
            }
        }
        try runner.addOperation(op)
        #expect(await atEventually(seconds: qtDeadline) { entered.isSet })
        // Its job has returned: the task waits on `sem`.
        #expect(await atEventually(seconds: qtDeadline) { full.operationCount == 0 })
        full.isSuspended = true
        try full.addOperation(qtNamed("held"))  // full from here
        op.cancel(after: .milliseconds(50))
        let probe = qtNamed("probe")
        probe.cancel(after: .milliseconds(300))
        let fired = await atEventually(seconds: 5) { probe.isCancelled }
        #expect(fired, "a deadline 300 ms away had not fired after 5 s: the deadline thread is blocked adding a job")
        if !fired { #expect(full.snapshot().blockedProducers == 1, "the deadline thread waits as a producer") }
        full.isSuspended = false  // unsticks it
        #expect(await atEventually(seconds: qtDeadline) { probe.isCancelled })
        try? await op.waitUntilFinished()
        #expect(op.isFinished)
        qtDrain(full)
        qtDrain(runner)
    }

    /// Its deinit adds two operations to `queue` (the second finds it full) and reports.
    final class AddsOnRelease: @unchecked Sendable {
        let queue: SpindleOperationQueue
        let outcome: QTLog<String>
        let done: QTGate
        init(_ queue: SpindleOperationQueue, _ outcome: QTLog<String>, _ done: QTGate) {
            self.queue = queue
            self.outcome = outcome
            self.done = done
        }
        deinit {
            do {
                try self.queue.addOperation(qtNamed("b1"))
                try self.queue.addOperation(qtNamed("b2"))
                self.outcome.append("added")
            } catch {
                self.outcome.append("\(error)")
            }
            self.done.open()
        }
    }

    /// An operation holding an `AddsOnRelease` (freed with the operation, by whoever drops the last reference).
    final class HoldsOnRelease: SpindleOperation, @unchecked Sendable {
        var held: AddsOnRelease?
        /// `main` waits for it: the adding thread has let go of the operation by then, so the worker drops the last
        /// reference (under load the worker could otherwise finish first, and the adding thread run the deinit).
        let letGo = QTGate()
        init(_ held: AddsOnRelease) {
            self.held = held
            super.init()
            self.name = "holder"
        }
        override func main() { _ = self.letGo.wait() }
    }

    /// The same blind spot without tasks: the worker frees a finished operation outside any operation
    /// (`context.queue` is nil there), and a user deinit it runs makes a blocking add to the same full queue. The
    /// drain waits refuse there (`workerOf === core`, SpindleOperationQueue+Waiting), the bounded add does not: it
    /// waits as a producer for room that only the blocked worker could free (width 1).
    @Test(.timeLimit(.minutes(1))) func aBlockingAddFromADeinitRunByTheWorkerDoesNotDeadlockIt() throws {
        let queue = try SpindleOperationQueue(name: "bd-deinit-add", maxConcurrentOperationCount: 1, capacity: 2,
                                              whenFull: .block)
        let never = qtNamed("never")  // never added: `waiting` stays a member, not ready, counted
        let waiting = qtNamed("waiting")
        try waiting.addDependency(never)
        try queue.addOperation(waiting)
        let outcome = QTLog<String>()
        let done = QTGate()
        func addHolder() throws -> QTGate {  // the queue holds the only reference once this returns
            let holder = HoldsOnRelease(AddsOnRelease(queue, outcome, done))
            try queue.addOperation(holder)
            return holder.letGo
        }
        try addHolder().open()
        let answered = done.wait(seconds: 5)
        #expect(answered, "the worker blocked adding to its own full queue from a deinit it ran")
        if !answered {
            #expect(queue.snapshot().blockedProducers == 1, "the worker waits as a producer")
            try queue.setCapacity(nil)  // unsticks it
            #expect(done.wait(seconds: qtDeadline))
        } else {
            #expect(outcome.all == [SpindleError.waitOnOwnQueue(name: "bd-deinit-add").description])
        }
        waiting.cancel()
        qtDrain(queue)
    }
}
