import Spindle
import Testing

/// `SpindleRunLoopThread`: a loop thread that stays alive with nothing registered, serves what was queued before
/// its shutdown, and is joined once however many callers stop it. Hand-offs go through semaphores with generous
/// deadlines. The one sleep (`Task.sleep` in the async test) is only the deadline racing the awaited shutdown,
/// which wins at once when the code is right; nothing waits on it to learn that something happened.
@Suite struct RunLoopThreadTests {
    let patience = RunLoopTestSupport.patience

    func after() -> SpindleDeadline { RunLoopTestSupport.after(self.patience) }

    /// Whether the kernel reports `thread` asleep ("S" in /proc/self/task/<tid>/stat): blocked, not spinning.
    func isSleeping(_ thread: SpindleThread) -> Bool {
        guard let bytes = readProcBytes("/proc/self/task/\(thread.threadID)/stat"),
            let close = bytes.lastIndex(of: UInt8(ascii: ")")), close + 2 < bytes.count
        else { return false }
        return bytes[close + 2] == UInt8(ascii: "S")
    }

    @Test func servesPerformsOnItsOwnThreadWithNothingRegistered() throws {
        let loopThread = try SpindleRunLoopThread(name: "rlt-serve")
        let ran = try SpindleSemaphore(value: 0)
        let onLoopThread = RLBox(false)
        // Nothing is registered: a plain run loop would return at once (and a loop around it would spin); this one
        // waits in the kernel for work.
        #expect(waitUntil(deadline: self.patience) { self.isSleeping(loopThread.thread) }, "held open, asleep")
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
        #expect(try loopThread.shutdown(until: self.after()))
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
        let stopper = try RunLoopTestSupport.spawn("rlt-stopper") {
            _ = try? loopThread.shutdown(until: RunLoopTestSupport.after(RunLoopTestSupport.patience))
        }
        // While the callout runs, the thread cannot exit: a bounded shutdown says so, and changes nothing else.
        #expect(try loopThread.shutdown(until: .after(.milliseconds(20))) == false)
        #expect(!loopThread.thread.isFinished)
        gate.signal()
        try stopper.join()
        #expect(served.withLock { $0 } == 3, "performs queued before the shutdown ran")
        #expect(loopThread.thread.isFinished)
        #expect(try loopThread.shutdown(until: .after(.zero)), "a later call returns at once: joined")
    }

    @Test func aNestedRunCannotSwallowTheShutdown() throws {
        // A callout runs the loop again (an operation waiting on a port, as the guide shows): the shutdown's stop
        // must still end the thread's own run once the nested one returns.
        let loopThread = try SpindleRunLoopThread(name: "rlt-nested")
        let inNested = try SpindleSemaphore(value: 0)
        let port = SpindlePort<Int>(name: "nested") { _ in }
        loopThread.runLoop.perform {
            try? SpindleRunLoop.current.add(port)
            inNested.signal()
            _ = try? SpindleRunLoop.current.run(untilInvalidated: port, before: RunLoopTestSupport.after(60))
        }
        #expect(inNested.wait(until: self.after()))
        let joined = RLBox(false)
        let stopper = try RunLoopTestSupport.spawn("rlt-nested-stop") {
            let done = (try? loopThread.shutdown(until: RunLoopTestSupport.after(RunLoopTestSupport.patience))) == true
            joined.withLock { $0 = done }
        }
        // The nested run ends when its port goes away; then the thread's own run must end too.
        port.invalidate()
        try stopper.join()
        #expect(joined.withLock { $0 })
        #expect(loopThread.thread.isFinished)
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
        #expect(try loopThread.shutdown(until: self.after()))
    }

    @Test func asyncShutdownSuspendsUntilTheThreadExited() async throws {
        let loopThread = try SpindleRunLoopThread(name: "rlt-async")
        let joined = await withTaskGroup(of: Bool.self) { group in
            group.addTask {  // two tasks await the shutdown; both must come back with the thread gone
                async let first: Void = loopThread.shutdown()
                async let second: Void = loopThread.shutdown()
                do { _ = try await (first, second) } catch { return false }
                return loopThread.thread.isFinished
            }
            group.addTask {  // a bound, so a shutdown that never ends fails the test instead of hanging it
                try? await Task.sleep(for: .seconds(atDeadline))  // the async suites' bound: a turn may come late
                return false
            }
            let result = await group.next()!
            group.cancelAll()  // the shutdowns stop waiting if they lost (their wait is cancellable)
            return result
        }
        #expect(joined)
    }

    @Test func releasedWithoutShutdownItStopsAndLetsItsThreadGo() throws {
        var loopThread: SpindleRunLoopThread? = try SpindleRunLoopThread(name: "rlt-released")
        let thread = loopThread!.thread
        let ran = try SpindleSemaphore(value: 0)
        loopThread!.runLoop.perform { ran.signal() }
        #expect(ran.wait(until: self.after()))
        loopThread = nil
        #expect(waitUntil(deadline: self.patience) { thread.isFinished }, "the thread exits on its own")
        do {
            try thread.join()
            Issue.record("the thread was left joinable: it would leak")
        } catch {
            guard case .threadNotJoinable = error else { Issue.record("\(error)"); return }  // detached
        }
    }
}
