import Testing

@testable import Spindle

/// Findings of a review of the async layer (own-queue waits from a group's async child or an own async operation,
/// `run` and the queue's bookkeeping, the task executor's termination wait, a moved executor's order). Each failed
/// before its fix; the two "control" tests pin the blocking forms' behaviour they are compared with.
@Suite struct AsyncMisuseReviewTests {
    // MARK: A. The async own-queue checks miss a group's children

    /// The blocking form refuses this (`isOwnQueueOfCallingThread` looks through the group); the async form only
    /// compares `SpindleAsyncOperation.running.owningQueue`, which is the group's inner queue.
    @Test func anAsyncChildOfAGroupAwaitingTheGroupsQueueIsTold() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let outcome = try await self.waitFromAGroupsAsyncChild(of: queue, "drain") {
            try await queue.waitUntilAllOperationsAreFinished()
        }
        #expect(outcome == [SpindleError.waitOnOwnQueue(name: queue.name).description])
    }

    @Test func anAsyncChildOfAGroupAwaitingTheGroupsQueueTerminationIsTold() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let outcome = try await self.waitFromAGroupsAsyncChild(of: queue, "termination") {
            queue.shutdown()
            try await queue.awaitTermination()
        }
        #expect(outcome == [SpindleError.waitOnOwnQueue(name: queue.name).description])
    }

    /// Runs `wait` in the async child of a group added to `queue`; returns what it recorded ("returned", or the
    /// error it threw). A wait that hangs fails the test and is rescued after 60 s by cancelling the group (which
    /// cancels the child's task and so ends the wait).
    private func waitFromAGroupsAsyncChild(of queue: SpindleOperationQueue, _ what: String,
                                           _ wait: @escaping @Sendable () async throws -> Void) async throws -> [String] {
        let outcome = QTLog<String>()
        let done = QTFlag()
        let child = SpindleAsyncOperation {
            do {
                try await wait()
                outcome.append("returned")
            } catch {
                outcome.append("\(error)")
            }
            done.set()
        }
        let group = try SpindleGroupOperation(operations: [child], maxConcurrentOperationCount: 1)
        try queue.addOperation(group)
        let answered = await atEventually(seconds: 60) { done.isSet }
        #expect(answered, "the async \(what) wait from inside the queue's group hangs (the group waits for it)")
        if !answered { group.cancel() }
        try await group.waitUntilFinished()
        return outcome.all
    }

    // MARK: B. addOperationWhenRoom from the queue's own async operation

    /// Control: the plain add from the queue's own (synchronous) operation on its full `.block` queue is refused.
    @Test func theBlockingAddFromTheQueuesOwnOperationIsRefused() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1, capacity: 1, whenFull: .block)
        let outcome = QTLog<String>()
        let op = SpindleBlockOperation {
            do { try queue.addOperation(SpindleBlockOperation {}) } catch { outcome.append("\(error)") }
        }
        try queue.addOperation(op)
        try await op.waitUntilFinished()
        #expect(outcome.all == [SpindleError.waitOnOwnQueue(name: queue.name).description])
    }

    /// The async add from the queue's own async operation waits for room that operation itself holds: for ever.
    @Test func theAsyncAddFromTheQueuesOwnAsyncOperationIsRefused() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1, capacity: 1, whenFull: .block)
        let outcome = QTLog<String>()
        let done = QTFlag()
        let op = SpindleAsyncOperation {
            do {
                try await queue.addOperationWhenRoom(SpindleBlockOperation {})
                outcome.append("added")
            } catch {
                outcome.append("\(error)")
            }
            done.set()
        }
        try queue.addOperation(op)
        let answered = await atEventually(seconds: 60) { done.isSet }
        #expect(answered, "addOperationWhenRoom waits for the room its own operation holds")
        if !answered { op.cancel() }  // rescue: cancels its task, which withdraws the producer
        try await op.waitUntilFinished()
        #expect(outcome.all == [SpindleError.waitOnOwnQueue(name: queue.name).description])
    }
}

// MARK: C. `run` returns before its operation has left the queue

extension AsyncMisuseReviewTests {
    /// `run`'s documentation: "The operation counts in the queue like any other until it has finished; the call
    /// returns after that", and AsyncRunOperation.start's: "(finished, completion and queue bookkeeping done)
    /// resumes the task". On a worker the queue's bookkeeping is deferred until `start()` returns, and `start()`
    /// resumes the task before returning: a full `.reject` queue of capacity 1 refuses an add made right after
    /// `run` returned.
    @Test func runReturnsOnlyOnceTheQueueIsDoneWithItsOperation() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        // Its worker exists first, so the adding thread (inside `run`'s continuation) has nothing left to do under
        // the queue's lock once the operation is taken.
        try queue.addOperationAndWait {}
        let inBody = QTGate(), goOn = QTGate()
        let returned = QTFlag(), returnedWhileHeld = QTFlag()
        // Holds the queue's lock from inside the body until `run` has returned (or 5 s): the worker cannot do its
        // bookkeeping for the operation (unlink it, free its room) meanwhile. A preempted worker looks the same.
        let holder = try SpindleThread.spawnJoinable(name: "rv-holder") {
            guard inBody.wait(seconds: 20) else { return }
            queue.core.lock.lock()
            goOn.open()
            if qtWaitUntil(seconds: 2, { returned.isSet }) { returnedWhileHeld.set() }
            queue.core.lock.unlock()
        }
        let value = try await queue.run { () -> Int in
            inBody.open()
            _ = goOn.wait(seconds: 20)
            return 5
        }
        returned.set()
        try holder.join()  // it has looked (at most 5 s) and let the lock go
        #expect(value == 5)
        #expect(!returnedWhileHeld.isSet, "run returned before the worker had done the queue's part")
    }

    /// The consequence, without any help: an add right after `run` returned is refused (run alone on an idle
    /// machine: 1,437 of 2,000 refused; under load the worker usually wins, so this one alone is not reliable).
    @Test func anAddRightAfterRunReturnedFindsRoom() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1, capacity: 1, whenFull: .reject)
        var refused = 0
        for i in 0..<2000 {
            _ = try await queue.run { i }
            do { try queue.addOperation(SpindleBlockOperation {}) } catch { refused += 1 }
            try await queue.waitUntilAllOperationsAreFinished()
        }
        #expect(refused == 0)
    }
}

// MARK: A (control)

extension AsyncMisuseReviewTests {
    /// Control for A: a synchronous child of the same group is refused at once.
    @Test func aSyncChildOfAGroupWaitingForTheGroupsQueueIsTold() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let outcome = QTLog<String>()
        let child = SpindleBlockOperation {
            do { try queue.waitUntilAllOperationsAreFinished() } catch { outcome.append("\(error)") }
        }
        let group = try SpindleGroupOperation(operations: [child], maxConcurrentOperationCount: 1)
        try queue.addOperation(group)
        try await group.waitUntilFinished()
        #expect(outcome.all == [SpindleError.waitOnOwnQueue(name: queue.name).description])
    }
}

// MARK: E. A task on the queue's own executor cannot await its termination

extension AsyncMisuseReviewTests {
    /// The async drain wait is allowed from a task running on the queue's task executor (it suspends; its job
    /// finishes); the async termination wait from the same place throws `waitOnOwnQueue`, because
    /// `refuseAsyncTerminationWait` applies the blocking form's thread check (the thread runs the job's operation).
    @Test func aTaskOnTheQueuesExecutorMayAwaitItsTermination() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let drained = await ATOutcome { () async throws -> Int in
            try await withTaskExecutorPreference(queue.taskExecutor) {
                queue.addOperation {}
                try await queue.waitUntilAllOperationsAreFinished()
                return 1
            }
        }
        #expect(drained == .value(1))  // allowed
        let terminated = await ATOutcome { () async throws -> Int in
            try await withTaskExecutorPreference(queue.taskExecutor) {
                queue.shutdown()
                try await queue.awaitTermination()
                return 2
            }
        }
        #expect(terminated == .value(2))
        if terminated != .value(2) { try await queue.awaitTermination() }
    }
}

// MARK: F. A moved run-loop executor runs a later job before an earlier one

/// An actor that records the order its calls ran in.
actor MovedExecutorOrderedDevice {
    let executor: SpindleRunLoopExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { self.executor.asUnownedSerialExecutor() }
    private(set) var order: [String] = []
    init(executor: SpindleRunLoopExecutor) { self.executor = executor }
    func record(_ tag: String) -> Int32 {
        self.order.append(tag)
        return SpindleThread.current.threadID
    }
}

extension AsyncMisuseReviewTests {
    /// "every job of that actor then runs on `thread`, one at a time, in the order enqueued" and, after a move,
    /// "the jobs still waiting on the loop, and every job enqueued later, run on a thread the executor starts".
    /// `ownerDidExit` marked the loop exited, then ran the retiring ports' invalidation handlers, and only then
    /// released the dropped performs (whose `PendingJob.deinit` moves them). A job enqueued in between was refused
    /// at once and moved first: it ran before the job that was waiting on the loop. Now the dropped performs go
    /// first, so both run, in order, while the exiting thread is still in the handler.
    /// The deadlines are generous: each task needs a cooperative thread to start, and under ThreadSanitizer, with
    /// other suites blocking theirs, that took longer than 20 s in CI.
    @Test func aMovedExecutorKeepsTheOrderJobsWereEnqueuedIn() async throws {
        let ready = QTGate(), exit = QTGate(), inHandler = QTGate(), release = QTGate()
        let handOff = SpindleLockedValue<(SpindleRunLoop, SpindlePort<Int>)?>(nil)
        let thread = try SpindleThread.spawnJoinable(name: "rv-leaving") {
            let port = SpindlePort<Int>(name: "rv-hold", invalidationHandler: {
                inHandler.open()
                _ = release.wait(seconds: 600)  // the exiting thread is held here, its dropped performs not yet released
            }) { _ in }
            let loop = SpindleRunLoop.current
            try? loop.add(port)
            handOff.withLockedValue { $0 = (loop, port) }
            ready.open()
            _ = exit.wait(seconds: 600)  // alive, never runs its loop
        }
        #expect(await atEventually { ready.tryWait() })
        let (loop, port) = try #require(handOff.value)
        let device = MovedExecutorOrderedDevice(executor: SpindleRunLoopExecutor(runLoop: loop))

        let first = Task { await device.record("first") }  // its job waits on the loop
        #expect(await atEventually(seconds: 300) { loop.state.withLock { $0.performs.count } == 1 })
        port.invalidate()  // its retirement waits for the loop, which never runs: the exiting thread does it
        exit.open()
        #expect(await atEventually(seconds: 300) { inHandler.tryWait() })

        let secondDone = QTFlag()
        let second = Task { () -> Int32 in
            let tid = await device.record("second")  // enqueued after `first`: refused by the exited loop, moved
            secondDone.set()
            return tid
        }
        let bothRanWhileHeld = await atEventually(seconds: 300) { secondDone.isSet }
        release.open()
        _ = await first.value
        _ = await second.value
        try thread.join()
        #expect(bothRanWhileHeld, "the jobs waited for the exiting thread's invalidation handler")
        let order = await device.order
        #expect(order == ["first", "second"])
    }
}

// MARK: B'. run from the queue's own async operation

extension AsyncMisuseReviewTests {
    /// Control: `addOperationAndWait` from the queue's own operation throws `waitOnOwnQueue`.
    /// The async `run` from the queue's own async operation on a width-1 queue waits for the slot its caller holds.
    @Test func runFromTheQueuesOwnAsyncOperationOnASerialQueueIsTold() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let outcome = QTLog<String>()
        let done = QTFlag()
        let op = SpindleAsyncOperation {
            do {
                let value = try await queue.run { 7 }
                outcome.append("\(value)")
            } catch {
                outcome.append("\(error)")
            }
            done.set()
        }
        try queue.addOperation(op)
        let answered = await atEventually(seconds: 60) { done.isSet }
        #expect(answered, "run waits for the slot its own async operation holds")
        if !answered { op.cancel() }  // rescue: cancels the awaiting task, which abandons the run
        try await op.waitUntilFinished()
        #expect(outcome.all == [SpindleError.waitOnOwnQueue(name: queue.name).description])
    }
}
