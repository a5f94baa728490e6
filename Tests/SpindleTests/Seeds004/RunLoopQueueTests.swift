import Glibc
import Testing

@testable import Spindle

/// The main queue's mechanism (a queue served by a run loop), tested on a thread of our own so it does not
/// depend on which thread the test runner gives us; plus the real main queue when we are on the main thread.
@Suite struct RunLoopQueueTests {
    /// A thread that runs its run loop until told to stop; exposes its loop and thread id.
    final class LoopThread: @unchecked Sendable {
        private let ready = try! SpindleSemaphore(value: 0)
        private let done = SpindleLockedValue(false)
        private(set) var loop: SpindleRunLoop!
        private(set) var tid: Int32 = 0
        private var thread: SpindleThread!

        init() throws {
            self.thread = try SpindleThread.spawnJoinable(name: "loop-thread") { [self] in
                self.loop = SpindleRunLoop.current
                self.tid = SpindleThread.current.threadID
                // A timer keeps the loop from returning at once for lack of sources.
                let keepAlive = try! SpindleTimer(interval: 3600, repeats: true) { _ in }
                try! self.loop.add(keepAlive, forMode: .default)
                self.ready.signal()
                while !self.done.value {
                    _ = try? self.loop.runOnce(before: .after(.seconds(1)))
                }
                keepAlive.invalidate()
            }
            #expect(self.ready.wait(timeout: .seconds(10)))
        }

        func stop() throws {
            self.done.withLockedValue { $0 = true }
            self.loop.stop()
            try self.thread.join()
        }
    }

    final class Log: @unchecked Sendable {
        let entries = SpindleLockedValue<[String]>([])
        func add(_ s: String) { self.entries.withLockedValue { $0.append(s) } }
        var all: [String] { self.entries.value }
    }

    @Test func operationsRunOnTheLoopThreadOneAtATimeInOrder() throws {
        let loopThread = try LoopThread()
        defer { try? loopThread.stop() }
        let queue = SpindleOperationQueue(name: "served", servedBy: loopThread.loop)
        let log = Log()
        let tids = SpindleLockedValue<Set<Int32>>([])
        let running = SpindleLockedValue(0)
        let overlap = SpindleLockedValue(false)
        for i in 0..<50 {
            queue.addOperation {
                running.withLockedValue { $0 += 1; if $0 > 1 { overlap.withLockedValue { $0 = true } } }
                tids.withLockedValue { _ = $0.insert(SpindleThread.current.threadID) }
                #expect(SpindleOperationQueue.current === queue)
                log.add("\(i)")
                running.withLockedValue { $0 -= 1 }
            }
        }
        #expect(try queue.waitUntilAllOperationsAreFinished(timeout: .seconds(10)))
        #expect(log.all == (0..<50).map { "\($0)" })
        #expect(tids.value == [loopThread.tid])
        #expect(!overlap.value)
    }

    @Test func suspendCancelAllAndWidthZeroAreHonoured() throws {
        let loopThread = try LoopThread()
        defer { try? loopThread.stop() }
        let queue = SpindleOperationQueue(name: "served", servedBy: loopThread.loop)
        let log = Log()

        queue.isSuspended = true
        let suspended = queue.addOperation { log.add("suspended") }
        #expect(!(try suspended.waitUntilFinished(timeout: .milliseconds(100))))
        queue.isSuspended = false
        #expect(try suspended.waitUntilFinished(timeout: .seconds(10)))

        try queue.setMaxConcurrentOperationCount(0)
        let blocked = queue.addOperation { log.add("width0") }
        #expect(!(try blocked.waitUntilFinished(timeout: .milliseconds(100))))
        try queue.setMaxConcurrentOperationCount(1)
        #expect(try blocked.waitUntilFinished(timeout: .seconds(10)))

        queue.isSuspended = true
        let cancelled = queue.addOperation { log.add("cancelled") }
        queue.cancelAllOperations()
        queue.isSuspended = false
        #expect(try cancelled.waitUntilFinished(timeout: .seconds(10)))
        #expect(cancelled.isCancelled)
        #expect(log.all == ["suspended", "width0"])
    }

    /// The runner gives neither a @MainActor test nor an exit test's body the main thread here, so the test below
    /// returns before its main-thread checks. What can be checked from another thread: the main queue is served by
    /// the main run loop only, so while nobody runs that loop, an operation added to it does not run. A process of
    /// its own, so the operation left in the (process-wide) main queue disturbs nothing.
    @Test func theMainQueueRunsNothingWhileNobodyRunsTheMainLoop() async {
        await #expect(processExitsWith: .success) {
            guard !SpindleThread.isMainThread else { exit(0) }  // the main thread: the test below covers it
            let ran = SpindleLockedValue(false)
            let op = SpindleOperationQueue.main.addOperation { ran.withLockedValue { $0 = true } }
            let finished = (try? op.waitUntilFinished(timeout: .milliseconds(200))) ?? true
            exit(!finished && !ran.value ? 0 : 3)
        }
    }

    @Test @MainActor func theMainQueueRunsOnTheMainThread() throws {
        let queue = SpindleOperationQueue.main
        #expect(queue === SpindleOperationQueue.main)
        #expect(queue.maxConcurrentOperationCount == 1)
        guard SpindleThread.isMainThread else { return }  // the runner gave us another thread: nothing to serve
        #expect(SpindleOperationQueue.current === queue)
        let onMain = SpindleLockedValue(false)
        let op = queue.addOperation { onMain.withLockedValue { $0 = SpindleThread.isMainThread } }
        var rounds = 0
        while !op.isFinished && rounds < 100 {
            _ = try SpindleRunLoop.main.runOnce(before: .after(.milliseconds(100)))
            rounds += 1
        }
        #expect(op.isFinished)
        #expect(onMain.value)
    }
}

/// Scheduling a port, timer or descriptor source on a second live run loop is misuse: a typed error, and the
/// source stays where it was.
@Suite struct RunLoopMisuseTests {
    @Test func schedulingOnASecondLiveRunLoopThrows() throws {
        let other = SpindleLockedValue<SpindleRunLoop?>(nil)
        let gotLoop = try SpindleSemaphore(value: 0)
        let finish = try SpindleSemaphore(value: 0)
        let thread = try SpindleThread.spawnJoinable(name: "other-loop") {
            other.withLockedValue { $0 = SpindleRunLoop.current }
            gotLoop.signal()
            _ = finish.wait(timeout: .seconds(30))
        }
        defer {
            finish.signal()
            try? thread.join()
        }
        #expect(gotLoop.wait(timeout: .seconds(10)))
        let here = SpindleRunLoop.current
        let there = try #require(other.value)

        let port = SpindlePort<Int>(name: "p") { _ in }
        try here.add(port)
        #expect(throws: SpindleError.self) { try there.add(port) }
        #expect(here.contains(port, inMode: .default))

        let timer = try SpindleTimer(interval: 60, repeats: false) { _ in }
        try here.add(timer, forMode: .default)
        #expect(throws: SpindleError.self) { try there.add(timer, forMode: .default) }
        #expect(here.contains(timer, inMode: .default) && !there.contains(timer, inMode: .default))

        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let source = try SpindleDescriptorSource(descriptor: fds[0], interest: .readable) { _ in }
        try here.add(source)
        #expect(throws: SpindleError.self) { try there.add(source) }

        port.invalidate()
        timer.invalidate()
        source.cancel()
    }
}
