import Spindle
import Testing

/// `SpindleRunLoopThread`: a loop thread that stays alive with nothing registered, serves what was queued before
/// its shutdown, and is joined once however many callers stop it. Hand-offs go through semaphores with generous
/// deadlines; nothing sleeps.
@Suite struct RunLoopThreadTests {
    let patience = RunLoopTestSupport.patience

    func after() -> SpindleDeadline { RunLoopTestSupport.after(self.patience) }

    @Test func servesPerformsOnItsOwnThreadWithNothingRegistered() throws {
        let loopThread = try SpindleRunLoopThread(name: "rlt-serve")
        let ran = try SpindleSemaphore(value: 0)
        let onLoopThread = RLBox(false)
        // Nothing is registered: a plain run loop would return at once; this one waits for work.
        #expect(loopThread.runLoop.limitDate(forMode: .default) == .distantFuture)
        loopThread.runLoop.perform { [thread = loopThread.thread] in
            onLoopThread.withLock { $0 = SpindleThread.current === thread }
            ran.signal()
        }
        #expect(ran.wait(until: self.after()))
        #expect(onLoopThread.withLock { $0 })
        // Someone else's stop() only makes the loop look again: it keeps serving.
        loopThread.runLoop.stop()
        loopThread.runLoop.perform { ran.signal() }
        #expect(ran.wait(until: self.after()))
        #expect(loopThread.thread.isExecuting)
        try loopThread.shutdown()
        #expect(loopThread.thread.isFinished)
    }

    @Test func shutdownServesWhatWasQueuedThenJoins() throws {
        let loopThread = try SpindleRunLoopThread(name: "rlt-drain")
        let gate = try SpindleSemaphore(value: 0)
        let inFirst = try SpindleSemaphore(value: 0)
        let served = RLBox(0)
        loopThread.runLoop.perform {
            inFirst.signal()
            _ = gate.wait(until: RunLoopTestSupport.after(RunLoopTestSupport.patience))
        }
        #expect(inFirst.wait(until: self.after()))  // the loop is inside the first callout
        for _ in 0..<3 { loopThread.runLoop.perform { served.withLock { $0 += 1 } } }
        let stopper = try RunLoopTestSupport.spawn("rlt-stopper") { try? loopThread.shutdown() }
        // While the callout runs, the thread cannot exit: a bounded shutdown says so, and changes nothing else.
        #expect(try loopThread.shutdown(until: .after(.milliseconds(20))) == false)
        #expect(!loopThread.thread.isFinished)
        gate.signal()
        try stopper.join()
        #expect(served.withLock { $0 } == 3, "performs queued before the shutdown ran")
        #expect(loopThread.thread.isFinished)
        #expect(try loopThread.shutdown(until: .after(.zero)), "a later call returns at once: joined")
    }

    @Test func overlappingShutdownsAllReturnJoined() throws {
        let loopThread = try SpindleRunLoopThread(name: "rlt-overlap")
        let results = RLBox(0)
        let callers = try (0..<4).map { i in
            try RunLoopTestSupport.spawn("rlt-stop\(i)") {
                if (try? loopThread.shutdown(until: RunLoopTestSupport.after(RunLoopTestSupport.patience))) == true {
                    results.withLock { $0 += 1 }
                }
            }
        }
        for caller in callers { try caller.join() }
        #expect(results.withLock { $0 } == 4)
        #expect(loopThread.thread.isFinished)
        // Joined exactly once, by the loop thread's own shutdown: joining it again is refused.
        #expect(throws: SpindleError.self) { try loopThread.thread.join() }
    }

    @Test func shutdownFromItsOwnThreadIsRefusedAndChangesNothing() throws {
        let loopThread = try SpindleRunLoopThread(name: "rlt-self")
        let done = try SpindleSemaphore(value: 0)
        let refusal = RLBox(false)
        loopThread.runLoop.perform {
            do {
                try loopThread.shutdown()
            } catch let error as SpindleError {
                if case .joinSelf = error { refusal.withLock { $0 = true } }
            } catch {}
            done.signal()
        }
        #expect(done.wait(until: self.after()))
        #expect(refusal.withLock { $0 })
        loopThread.runLoop.perform { done.signal() }  // still running
        #expect(done.wait(until: self.after()))
        try loopThread.shutdown()
    }

    @Test func asyncShutdownSuspendsUntilTheThreadExited() async throws {
        let loopThread = try SpindleRunLoopThread(name: "rlt-async")
        let ran = try SpindleSemaphore(value: 0)
        loopThread.runLoop.perform { ran.signal() }
        try await ran.wait()
        async let first: Void = loopThread.shutdown()
        async let second: Void = loopThread.shutdown()
        _ = try await (first, second)
        #expect(loopThread.thread.isFinished)
    }

    @Test func releasedWithoutShutdownItStopsAndLetsItsThreadGo() throws {
        let unjoinedBefore = SpindleThread.unjoinedReleaseCount
        var loopThread: SpindleRunLoopThread? = try SpindleRunLoopThread(name: "rlt-released")
        let thread = loopThread!.thread
        let ran = try SpindleSemaphore(value: 0)
        loopThread!.runLoop.perform { ran.signal() }
        #expect(ran.wait(until: self.after()))
        loopThread = nil
        #expect(waitUntil(deadline: self.patience) { thread.isFinished }, "the thread exits on its own")
        #expect(SpindleThread.unjoinedReleaseCount == unjoinedBefore, "detached, not leaked")
    }
}
