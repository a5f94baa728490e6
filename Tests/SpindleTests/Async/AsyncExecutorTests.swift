import Glibc
import Testing

@testable import Spindle

/// A queue as a `TaskExecutor` (SE-0417) and `SpindleRunLoopExecutor` as an actor's `SerialExecutor`.
@Suite struct AsyncExecutorTests {
    /// Where the calling code runs: on which queue's worker, which Spindle thread.
    struct Place: Sendable, Equatable {
        let onQueue: Bool
        let threadName: String
        init(_ queue: SpindleOperationQueue) {
            self.onQueue = SpindleOperationQueue.current === queue
            self.threadName = SpindleThread.current.name
        }
    }

    @Test func childTasksPreferringTheQueueRunOnItsWorkers() async throws {
        let queue = try SpindleOperationQueue(name: "at-exec", maxConcurrentOperationCount: 2)
        let places = await withTaskExecutorPreference(queue.taskExecutor) { () async -> [Place] in
            var places = [Place(queue)]  // the body itself
            async let child = Place(queue)
            places.append(await child)
            await withTaskGroup(of: Place.self) { group in
                for _ in 0..<20 { group.addTask { Place(queue) } }
                for await place in group { places.append(place) }
            }
            return places
        }
        #expect(places.count == 22)
        for place in places {
            #expect(place.onQueue)
            #expect(place.threadName.hasPrefix("spindle.w"), "a worker of the queue, not a cooperative thread")
        }
        #expect(!Place(queue).onQueue, "outside the preference the task is back on the global executor")
    }

    @Test func anUnstructuredTaskWithThePreferenceRunsThere() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let place = await Task(executorPreference: queue.taskExecutor) { Place(queue) }.value
        #expect(place.onQueue && place.threadName.hasPrefix("spindle.w"))
    }

    /// Issue 19 (what `enqueue` now documents): a queue that refuses a job (here: shut down) does not lose it; the
    /// job runs on the thread that enqueued it, not on the queue.
    @Test func aShutDownQueuesExecutorRunsTheJobsOnTheEnqueuingThread() async throws {
        let queue = try SpindleOperationQueue(name: "at-exec-closed", maxConcurrentOperationCount: 1)
        queue.shutdown()
        let place = await Task(executorPreference: queue.taskExecutor) { Place(queue) }.value
        #expect(!place.onQueue && !place.threadName.hasPrefix("spindle.w"))
        #expect(queue.snapshot().finished == 0)
        #expect(try await queue.awaitTermination(timeout: .seconds(10)))
    }

    /// A refused job does not run inside the call that enqueued it (there it would run in the middle of whatever
    /// that thread was doing: a `Task` initialiser, a `signal()` that resumes a task): it goes to the global
    /// concurrent executor. Here the body waits for the creating thread to go on past `Task(…)`; run inside that
    /// initialiser, it would time out instead.
    @Test func aShutDownQueuesExecutorDoesNotRunAJobInsideTheCallThatEnqueuedIt() async throws {
        let queue = try SpindleOperationQueue(name: "at-exec-closed-inline", maxConcurrentOperationCount: 1)
        queue.shutdown()
        let creatorWentOn = try SpindleSemaphore(value: 0)
        let task = Task(executorPreference: queue.taskExecutor) { () -> Bool in
            creatorWentOn.wait(timeout: .seconds(10))
        }
        _ = creatorWentOn.signal()
        #expect(await task.value, "the body ran inside Task(executorPreference:), on the creating thread")
        #expect(queue.snapshot().finished == 0)
    }

    @Test func jobsRespectTheQueuesWidthAndSuspendedTasksHoldNoThread() async throws {
        // Width 1: at most one job at a time; yet 30 tasks can all be suspended at once, since a suspended task
        // holds neither the queue's slot nor its thread.
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let inside = QTHighWater()
        let sem = try SpindleSemaphore(value: 0)
        try await withTaskExecutorPreference(queue.taskExecutor) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<30 {
                    group.addTask {
                        inside.enter()
                        inside.leave()
                        try await sem.wait()
                        inside.enter()
                        inside.leave()
                    }
                }
                group.addTask {
                    #expect(await atEventually { sem.waiterCount == 30 })
                    for _ in 0..<30 { sem.signal() }
                }
                try await group.waitForAll()
            }
        }
        #expect(inside.maximum == 1)
        try await queue.waitUntilAllOperationsAreFinished()
    }

    @Test func jobPrioritiesMapOntoQueuePriorities() {
        #expect(ExecutorJobOperation.queuePriority(for: JobPriority(TaskPriority.high)) == .high)
        #expect(ExecutorJobOperation.queuePriority(for: JobPriority(TaskPriority.medium)) == .normal)
        #expect(ExecutorJobOperation.queuePriority(for: JobPriority(TaskPriority.low)) == .low)
        #expect(ExecutorJobOperation.queuePriority(for: JobPriority(TaskPriority.background)) == .veryLow)
    }

    /// A job whose operation the queue cancels (`cancelAllOperations` while it waits) still runs: its task is
    /// waiting for it (before, the operation finished unrun and the task never resumed).
    @Test func aJobWhoseOperationIsCancelledStillRuns() async throws {
        let queue = try SpindleOperationQueue(name: "at-cancelled-job", maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let ran = QTFlag()
        let task = Task(executorPreference: queue.taskExecutor) { () -> Int in
            ran.set()
            return 42
        }
        #expect(await atEventually { queue.operationCount == 1 }, "the task's first job waits in the queue")
        queue.cancelAllOperations()
        queue.isSuspended = false
        // Bounded, so a dropped job fails the test instead of hanging it.
        #expect(await atEventually { ran.isSet }, "the cancelled operation's job never ran")
        if ran.isSet { #expect(await task.value == 42) }
        #expect(await atEventually { queue.operationCount == 0 })
        queue.shutdown(.drain)
    }

    /// A huge but valid `Duration` (beyond `Int64.max` seconds, where `Duration.components` traps) saturates.
    @Test func hugeDurationsSaturateInsteadOfTrapping() async {
        await #expect(processExitsWith: .success) {
            let huge = Duration.seconds(Int64.max) * 4
            guard SpindleDeadline.after(huge) == .distantFuture, SpindleDeadline.after(.zero - huge) <= .now else {
                exit(3)
            }
            let semaphore = try! SpindleSemaphore(value: 1)
            guard semaphore.wait(timeout: huge), !semaphore.wait(timeout: .zero - huge) else { exit(4) }
            let backoff = SpindleRetryOperation.Backoff.exponential(first: huge, maximum: huge * 2)
            guard backoff.delay(beforeAttempt: 3) == huge * 2 else { exit(5) }
            exit(0)
        }
    }

    // MARK: Run-loop executor

    /// Stands for a C library that must always be called from the same thread.
    actor Device {
        let executor: SpindleRunLoopExecutor
        nonisolated var unownedExecutor: UnownedSerialExecutor { self.executor.asUnownedSerialExecutor() }
        private var calls = 0
        private var threads: Set<Int32> = []

        init(executor: SpindleRunLoopExecutor) { self.executor = executor }

        func call() -> Int32 {
            self.calls += 1
            let tid = SpindleThread.current.threadID
            self.threads.insert(tid)
            return tid
        }

        func callAcrossASuspension(_ sem: SpindleSemaphore) async throws -> [Int32] {
            let before = SpindleThread.current.threadID
            try await sem.wait()
            return [before, SpindleThread.current.threadID]
        }

        var summary: (calls: Int, threads: Set<Int32>) { (self.calls, self.threads) }
    }

    @Test func everyCallRunsOnTheExecutorsOneThreadUnderConcurrentCallers() async throws {
        let executor = try SpindleRunLoopExecutor(name: "at-device")
        let device = Device(executor: executor)
        let expected = executor.thread!.threadID
        #expect(expected != 0)
        let tids = await withTaskGroup(of: [Int32].self) { group in
            for _ in 0..<8 {
                group.addTask {
                    var seen: [Int32] = []
                    for _ in 0..<250 { seen.append(await device.call()) }
                    return seen
                }
            }
            return await group.reduce(into: [Int32]()) { $0 += $1 }
        }
        #expect(tids.count == 2000)
        #expect(Set(tids) == [expected])
        let summary = await device.summary
        #expect(summary.calls == 2000, "calls were serialised: no increment lost")
        #expect(summary.threads == [expected])
    }

    @Test func theActorComesBackToItsThreadAfterSuspending() async throws {
        let executor = try SpindleRunLoopExecutor(name: "at-device")
        let device = Device(executor: executor)
        let sem = try SpindleSemaphore(value: 0)
        async let sides = device.callAcrossASuspension(sem)
        #expect(await atEventually { sem.waiterCount == 1 })
        sem.signal()
        let tids = try await sides
        #expect(tids == [executor.thread!.threadID, executor.thread!.threadID])
    }

    @Test func assumeIsolatedWorksFromTheLoopsOwnCallouts() async throws {
        let executor = try SpindleRunLoopExecutor(name: "at-device")
        let device = Device(executor: executor)
        let done = QTGate()
        let result = QTLog<Int32>()
        executor.runLoop.perform {
            result.append(device.assumeIsolated { $0.call() })
            done.open()
        }
        #expect(await atEventually { done.tryWait() })
        #expect(result.all == [executor.thread!.threadID])
        #expect(executor.isIsolatingCurrentContext() == false, "the test's own thread does not own the loop")
    }

    @Test func releasingTheExecutorEndsItsThread() async throws {
        var executor: SpindleRunLoopExecutor? = try SpindleRunLoopExecutor(name: "at-gone")
        let thread = executor!.thread!
        var device: Device? = Device(executor: executor!)
        _ = await device!.call()
        device = nil
        executor = nil
        #expect(await atEventually { thread.isFinished }, "the loop's thread exits once nothing holds the executor")
    }

    /// A thread that runs its own loop until the returned port is invalidated (or `atDeadline`); returns once the
    /// loop is ready.
    private func threadRunningItsLoop(named name: String) async throws -> (SpindleThread, SpindleRunLoop, SpindlePort<Int>) {
        let ready = QTGate()
        let handOff = SpindleLockedValue<(SpindleRunLoop, SpindlePort<Int>)?>(nil)
        let thread = try SpindleThread.spawnJoinable(name: name) {
            let port = SpindlePort<Int>(name: "keep") { _ in }
            let loop = SpindleRunLoop.current
            try? loop.add(port)
            handOff.withLockedValue { $0 = (loop, port) }
            ready.open()
            _ = try? loop.run(untilInvalidated: port, before: .after(.seconds(atDeadline)))
        }
        #expect(await atEventually { ready.tryWait() })
        let (loop, port) = try #require(handOff.value)
        return (thread, loop, port)
    }

    @Test func aLoopRunByItsOwnThreadCanServeAnActor() async throws {
        let (thread, loop, port) = try await self.threadRunningItsLoop(named: "at-own-loop")
        let device = Device(executor: SpindleRunLoopExecutor(runLoop: loop))
        let tid = await device.call()
        #expect(tid == thread.threadID)
        port.invalidate()
        try thread.join()
    }

    /// A `stop()` of the executor's own loop does not end its thread: the actor keeps working (before, the thread
    /// exited and every later call into the actor hung).
    @Test func stoppingTheExecutorsLoopDoesNotEndItsThread() async throws {
        let executor = try SpindleRunLoopExecutor(name: "at-device")
        let device = Device(executor: executor)
        let tid = await device.call()
        for _ in 0..<3 {
            executor.runLoop.stop()
            let answers = QTLog<Int32>()
            let call = Task { answers.append(await device.call()) }
            // Bounded, so a dropped job fails the test instead of hanging it.
            #expect(await atEventually { answers.count == 1 }, "the actor stopped answering")
            guard answers.count == 1 else { return }
            await call.value
            #expect(answers.all == [tid])
        }
        #expect(executor.thread?.isFinished == false)
    }

    /// With `init(runLoop:)`, a loop whose thread exits moves the actor to a thread the executor starts: a call
    /// made afterwards is answered there, and later ones too (before, the enqueue trapped).
    @Test func anActorWhoseLoopThreadExitedMovesToAThreadOfItsOwn() async throws {
        let (thread, loop, port) = try await self.threadRunningItsLoop(named: "at-leaving")
        let executor = SpindleRunLoopExecutor(runLoop: loop)
        let device = Device(executor: executor)
        #expect(await device.call() == thread.threadID)
        port.invalidate()
        try thread.join()
        let eventsBefore = SpindleDiagnostics.eventCount
        let moved = await device.call()
        #expect(moved != thread.threadID && moved != 0)
        #expect(await device.call() == moved, "later calls run on the same stand-in thread")
        #expect(readComm(tid: moved) == "spindle-actor")
        #expect(SpindleDiagnostics.eventCount > eventsBefore, "the move was not reported")
        #expect(executor.isIsolatingCurrentContext() == false)
    }

    /// Jobs waiting on a loop whose thread exits without running them are not dropped: they run on the stand-in
    /// (before, the exiting loop released them unrun and their tasks waited for ever).
    @Test func jobsLeftOnALoopWhoseThreadExitsStillRun() async throws {
        let ready = QTGate()
        let exit = QTGate()
        let handOff = SpindleLockedValue<SpindleRunLoop?>(nil)
        let thread = try SpindleThread.spawnJoinable(name: "at-never-runs") {
            handOff.withLockedValue { $0 = SpindleRunLoop.current }
            ready.open()
            _ = exit.wait(seconds: 6 * atDeadline)  // alive, never runs its loop; `opener` always opens it
        }
        #expect(await atEventually { ready.tryWait() })
        let loop = handOff.value!
        let device = Device(executor: SpindleRunLoopExecutor(runLoop: loop))
        // A plain thread (not the cooperative pool, which other suites may keep busy) lets the loop's thread exit
        // once the call's job waits on the loop, which its thread never runs.
        let sawPending = QTFlag()
        let opener = try SpindleThread.spawnJoinable(name: "at-opener") {
            if qtWaitUntil(seconds: atDeadline, { loop.limitDate(forMode: .default) != nil }) { sawPending.set() }
            exit.open()
        }
        let answers = QTLog<Int32>()
        let call = Task { answers.append(await device.call()) }  // its job waits on the loop, then moves
        // Generous: under ThreadSanitizer other suites may keep the cooperative pool busy for a while.
        let answered = await atEventually(seconds: 2 * atDeadline) { answers.count == 1 }
        try opener.join()
        try thread.join()
        #expect(sawPending.isSet, "the call's job never waited on the loop")
        #expect(answered, "a job left on the loop was dropped: its call never returned")
        guard answered else { return }  // the call's task would wait for ever
        await call.value
        #expect(answers.all.count == 1 && answers.all[0] != thread.threadID && answers.all[0] != 0, "\(answers.all)")
    }
}
