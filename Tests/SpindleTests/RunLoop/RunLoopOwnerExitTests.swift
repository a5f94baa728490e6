import CShim
import Glibc
import Spindle
import Testing

/// A run loop whose thread has exited while the loop object lives on (a `SpindleRunLoopThread` after `shutdown()`,
/// or a plain thread's loop someone else still holds): nothing is served there any more, so invalidation runs its
/// handler where it can, and what was scheduled there can move to a live loop. Hand-offs go through joins and
/// semaphores with generous deadlines; nothing sleeps.
@Suite("RunLoop after its thread exited")
struct RunLoopOwnerExitTests {
    typealias T = RunLoopTestSupport

    @Test("invalidating a port whose loop's thread exited runs the handler here, before invalidate() returns")
    func invalidationAfterTheThreadExited() throws {
        let loopThread = try SpindleRunLoopThread(name: "rl-exit-port")
        let delivered = CallRecorder()
        let invalidations = CallRecorder()
        let port = SpindlePort<Int>(name: "orphan", invalidationHandler: { invalidations.record() }) { _ in
            delivered.record()
        }
        try loopThread.runLoop.add(port)
        #expect(try loopThread.shutdown(until: T.after(T.patience)))
        // The loop object is still alive (`loopThread.runLoop`), its thread is gone.
        try port.send(1)  // accepted: it waits for a live loop, like a message sent to an unscheduled port
        #expect(port.pendingCount == 1)
        port.invalidate()
        #expect(invalidations.threads == [cshim_gettid()], "the handler ran once, on the invalidating thread")
        #expect(port.isRetired && !port.isValid)
        #expect(port.pendingCount == 0, "the undeliverable message is discarded")
        port.invalidate()
        #expect(invalidations.count == 1)
        #expect(delivered.count == 0)
        #expect(!loopThread.runLoop.contains(port, inMode: .default))
    }

    @Test("a port still waiting to retire when its loop's plain thread exits gets its handler once, on that thread")
    func retiringPortAtAPlainThreadsExit() throws {
        let loopBox = RLBox<SpindleRunLoop?>(nil)
        let portBox = RLBox<SpindlePort<Int>?>(nil)
        let invalidations = CallRecorder()
        let delivered = CallRecorder()
        let exitingThread = RLBox<Int32>(0)
        try T.onNewThread("rl-exit-plain") {
            let loop = SpindleRunLoop.current
            loopBox.withLock { $0 = loop }  // keeps the loop alive after its thread is gone
            let port = SpindlePort<Int>(name: "waiting", invalidationHandler: { invalidations.record() }) { _ in
                delivered.record()
            }
            try loop.add(port)
            try port.send(7)
            port.invalidate()  // queued for the loop's next pass, which never comes: the thread exits
            portBox.withLock { $0 = port }
            exitingThread.withLock { $0 = cshim_gettid() }
        }
        // Joined: the thread has exited.
        let port = try #require(portBox.withLock { $0 })
        #expect(invalidations.threads == [exitingThread.withLock { $0 }], "once, on the exiting thread")
        #expect(port.isRetired)
        #expect(port.pendingCount == 0)
        #expect(delivered.count == 0, "its last messages are discarded: nothing runs the loop any more")
        #expect(loopBox.withLock { $0 } != nil)
    }

    @Test("a port, timer or source left on a loop whose thread exited can be added to a live loop and is served there")
    func schedulingMovesOffAnExitedLoop() throws {
        let first = try SpindleRunLoopThread(name: "rl-exit-first")
        let second = try SpindleRunLoopThread(name: "rl-exit-second")
        let served = OracleSemaphore()
        let onSecond = RLBox<[String]>([])
        let secondThread = second.thread
        let port = SpindlePort<Int>(name: "mover") { value in
            onSecond.withLock { $0.append("port \(value) \(SpindleThread.current === secondThread)") }
            served.post()
        }
        // In a mode the first thread never runs, so it cannot fire there before the shutdown.
        let timer = try SpindleTimer(interval: 0.001, repeats: false) { _ in
            onSecond.withLock { $0.append("timer \(SpindleThread.current === secondThread)") }
            served.post()
        }
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let readEnd = fds[0]
        let sourceBox = RLBox<SpindleDescriptorSource?>(nil)
        let source = try SpindleDescriptorSource(descriptor: readEnd, interest: .readable) { _ in
            var byte: UInt8 = 0
            _ = read(readEnd, &byte, 1)
            onSecond.withLock { $0.append("source \(SpindleThread.current === secondThread)") }
            sourceBox.withLock { $0 }?.cancel()
            served.post()
        }
        sourceBox.withLock { $0 = source }
        try first.runLoop.add(port)
        try first.runLoop.add(timer, forMode: "parked")
        try first.runLoop.add(source, forMode: "parked")
        #expect(try first.shutdown(until: T.after(T.patience)))

        try port.send(1)  // waits on the port until it is scheduled on a live loop
        try second.runLoop.add(port)
        try second.runLoop.add(timer)
        try second.runLoop.add(source)
        #expect(second.runLoop.contains(port, inMode: .default) && second.runLoop.contains(timer, inMode: .default))
        _ = "x".withCString { write(fds[1], $0, 1) }
        for _ in 0..<3 { #expect(served.wait()) }
        #expect(Set(onSecond.withLock { $0 }) == ["port 1 true", "timer true", "source true"])
        port.invalidate()
        #expect(try second.shutdown(until: T.after(T.patience)))
        #expect(port.isRetired)
    }

    @Test("an exited loop runs nothing: perform returns false and releases the block, add throws runLoopExited")
    func anExitedLoopRefusesWork() throws {
        let loopThread = try SpindleRunLoopThread(name: "rl-exit-refuse")
        let loop = loopThread.runLoop
        let ran = CallRecorder()
        let released = CallRecorder()
        do {
            // Queued for a mode the thread never runs: dropped unrun when the thread exits, and released.
            let token = ReleaseToken { released.record() }
            let queued = loop.perform(inModes: ["never-run"]) { [token] in _ = token; ran.record() }
            #expect(queued)
        }
        #expect(try loopThread.shutdown(until: T.after(T.patience)))
        #expect(released.threads == [loopThread.thread.threadID], "dropped at the exit, on the exiting thread")
        do {
            let token = ReleaseToken { released.record() }
            let queued = loop.perform { [token] in _ = token; ran.record() }
            #expect(!queued)
        }
        #expect(released.threads == [loopThread.thread.threadID, cshim_gettid()], "released on the calling thread")
        #expect(ran.count == 0)

        let port = SpindlePort<Int>(name: "late") { _ in }
        expectSpindleError(.runLoopExited) { try loop.add(port) }
        #expect(!loop.contains(port, inMode: .default) && port.isValid)
        let timer = try SpindleTimer(interval: 1, repeats: false) { _ in }
        expectSpindleError(.runLoopExited) { try loop.add(timer) }
        #expect(timer.fireDate == nil && timer.isValid)
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let source = try SpindleDescriptorSource(descriptor: fds[0], interest: .readable) { _ in }
        expectSpindleError(.runLoopExited) { try loop.add(source) }
        #expect(source.isActive)
        port.invalidate()
        timer.invalidate()
        source.cancel()
    }

    @Test("a port invalidated as its loop thread shuts down: the handler runs exactly once, and the port retires")
    func invalidationRacingTheThreadsExit() throws {
        for round in 0..<60 {
            let loopThread = try SpindleRunLoopThread(name: "rl-exit-race")
            let invalidations = CallRecorder()
            let port = SpindlePort<Int>(name: "race\(round)", invalidationHandler: { invalidations.record() }) { _ in }
            try loopThread.runLoop.add(port)
            let go = try SpindleSemaphore(value: 0)
            let invalidator = try T.spawn("rl-exit-inval") {
                _ = go.wait(until: T.after(T.patience))
                port.invalidate()
            }
            go.signal()
            #expect(try loopThread.shutdown(until: T.after(T.patience)))
            try invalidator.join()
            // Both are over: the loop thread retired it, or invalidate() did (on a loop whose thread had gone).
            #expect(port.isRetired, "round \(round)")
            #expect(invalidations.count == 1, "round \(round)")
        }
    }
}

/// Calls `onRelease` when freed: tells a test when a block that captured it was released.
private final class ReleaseToken: @unchecked Sendable {
    let onRelease: @Sendable () -> Void
    init(_ onRelease: @escaping @Sendable () -> Void) { self.onRelease = onRelease }
    deinit { self.onRelease() }
}
