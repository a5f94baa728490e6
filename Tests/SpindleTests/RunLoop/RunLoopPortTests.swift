import CShim
import Glibc
import Spindle
import Testing

@Suite("RunLoop ports")
struct RunLoopPortTests {
    typealias T = RunLoopTestSupport

    /// A message carrying its sender and that sender's sequence number.
    struct Stamp: Sendable {
        let sender: Int
        let sequence: Int
    }

    @Test("a storm of 4 senders x 10,000 messages delivers each exactly once, in order per sender")
    func messageStorm() throws {
        let senders = 4
        let perSender = 10_000
        let delivered = RLBox<[[Int]]>(Array(repeating: [], count: 4))
        let handlerThreads = RLBox<Set<Int32>>([])
        try T.onNewThread("rl-storm") {
            let loop = SpindleRunLoop.current
            let port = SpindlePort<Stamp>(name: "storm") { stamp in
                delivered.withLock { $0[stamp.sender].append(stamp.sequence) }
                handlerThreads.withLock { _ = $0.insert(cshim_gettid()) }
            }
            try loop.add(port, forMode: .common)
            var threads: [SpindleThread] = []
            for sender in 0..<senders {
                threads.append(try T.spawn("rl-sender") {
                    for sequence in 0..<perSender { try? port.send(Stamp(sender: sender, sequence: sequence)) }
                })
            }
            let deadline = T.after(30)
            while delivered.withLock({ $0.reduce(0) { $0 + $1.count } }) < senders * perSender, !deadline.hasPassed {
                _ = try loop.runOnce(before: deadline)
            }
            for thread in threads { try thread.join() }
            port.invalidate()
            try loop.run(until: T.after(10))
        }
        let lists = delivered.withLock { $0 }
        for sender in 0..<senders {
            #expect(lists[sender] == Array(0..<perSender), "sender \(sender): \(lists[sender].count) delivered")
        }
        #expect(handlerThreads.withLock { $0 }.count == 1)
    }

    @Test("invalidation racing sends loses nothing accepted: a send either throws or is delivered")
    func invalidationRacingSends() throws {
        let senders = 3
        let accepted = RLBox<[Int]>(Array(repeating: 0, count: 3))
        let delivered = RLBox<[[Int]]>(Array(repeating: [], count: 3))
        let invalidations = CallRecorder()
        let halfway = try SpindleSemaphore(value: 0)
        let loopTID = RLBox<Int32>(0)
        let completed = RLBox(false)
        try T.onNewThread("rl-race") {
            let loop = SpindleRunLoop.current
            loopTID.withLock { $0 = cshim_gettid() }
            let total = RLBox(0)
            let port = SpindlePort<Stamp>(name: "race", invalidationHandler: { invalidations.record() }) { stamp in
                delivered.withLock { $0[stamp.sender].append(stamp.sequence) }
                if total.withLock({ $0 += 1; return $0 }) == 2_000 { halfway.signal() }
            }
            try loop.add(port, forMode: .default)
            var threads: [SpindleThread] = []
            for sender in 0..<senders {
                threads.append(try T.spawn("rl-sender") {
                    var sequence = 0
                    while true {
                        do { try port.send(Stamp(sender: sender, sequence: sequence)) } catch { break }
                        sequence += 1
                    }
                    accepted.withLock { $0[sender] = sequence }
                })
            }
            let invalidator = try T.spawn("rl-invalidate") {
                _ = halfway.wait(timeout: .seconds(10))
                port.invalidate()
            }
            let done = try loop.run(untilInvalidated: port, before: T.after(30))
            completed.withLock { $0 = done }
            for thread in threads { try thread.join() }
            try invalidator.join()
        }
        #expect(completed.withLock { $0 })
        let counts = accepted.withLock { $0 }
        let lists = delivered.withLock { $0 }
        for sender in 0..<senders {
            #expect(lists[sender] == Array(0..<counts[sender]), "sender \(sender) accepted \(counts[sender])")
        }
        #expect(invalidations.threads == [loopTID.withLock { $0 }])
    }

    @Test("invalidating a port from another thread wakes the loop waiting for it (the seed's pattern)")
    func invalidationWakesLoop() throws {
        let ready = try SpindleSemaphore(value: 0)
        let portBox = RLBox<SpindlePort<Int>?>(nil)
        let outcome = RLBox<(Bool, Double)>((false, 99))
        let loopThread = try T.spawn("rl-seed") {
            // The operation's main: add a port to the current loop, start async work, run until invalidated.
            let port = SpindlePort<Int>(name: "upload") { _ in }
            try? SpindleRunLoop.current.add(port, forMode: .common)
            portBox.withLock { $0 = port }
            ready.signal()
            let start = cshim_clock_monotonic_ns()
            let done = (try? SpindleRunLoop.current.run(untilInvalidated: port, before: T.after(10))) ?? false
            outcome.withLock { $0 = (done, T.seconds(since: start)) }
        }
        #expect(ready.wait(timeout: .seconds(10)))
        // The "callback" (or cancel) on another thread invalidates the port.
        try #require(portBox.withLock { $0 }).invalidate()
        try loopThread.join()
        let (done, elapsed) = outcome.withLock { $0 }
        #expect(done)
        #expect(elapsed < 5)
    }

    @Test("send after invalidation throws; an unscheduled port's invalidation handler runs on the invalidating thread")
    func sendAfterInvalidationThrows() throws {
        let handler = CallRecorder()
        let port = SpindlePort<Int>(name: "closed", invalidationHandler: { handler.record() }) { _ in }
        try port.send(1)
        #expect(port.pendingCount == 1)
        port.invalidate()
        port.invalidate()
        #expect(!port.isValid && port.isRetired)
        #expect(handler.threads == [cshim_gettid()])
        #expect(throws: SpindleError.self) { try port.send(2) }
        do {
            try port.send(3)
        } catch SpindleError.portInvalidated(let name) {
            #expect(name == "closed")
        }
    }

    @Test("messages sent before the port is scheduled are delivered once it is")
    func messagesWaitForScheduling() throws {
        let got = RLBox<[Int]>([])
        try T.onNewThread {
            let port = SpindlePort<Int>(name: "early") { value in got.withLock { $0.append(value) } }
            try port.send(1)
            try port.send(2)
            let loop = SpindleRunLoop.current
            try loop.add(port, forMode: .default)
            guard try loop.runOnce(before: T.after(10)) else { throw TestFailure(message: "nothing handled") }
            port.invalidate()
            try loop.run(until: T.after(10))
        }
        #expect(got.withLock { $0 } == [1, 2])
    }

    /// Issue 19: the documentation said scheduling a port on a second loop traps; it throws, for ports, timers and
    /// descriptor sources alike, and the first loop keeps serving it.
    @Test("a port, timer or source scheduled on another live loop throws scheduledOnAnotherRunLoop; nothing changes")
    func schedulingOnASecondLiveLoopThrows() throws {
        let first = try SpindleRunLoopThread(name: "rl-first")
        let second = try SpindleRunLoopThread(name: "rl-second")
        let delivered = OracleSemaphore()
        let onFirstThread = RLBox<[Bool]>([])
        let port = SpindlePort<Int>(name: "one-loop") { [thread = first.thread] _ in
            onFirstThread.withLock { $0.append(SpindleThread.current === thread) }
            delivered.post()
        }
        try first.runLoop.add(port)
        expectSpindleError(.scheduledOnAnotherRunLoop(name: "one-loop")) { try second.runLoop.add(port) }
        expectSpindleError(.scheduledOnAnotherRunLoop(name: "one-loop")) {
            try second.runLoop.add(port, forMode: "other")
        }
        #expect(first.runLoop.contains(port, inMode: .default))
        #expect(!second.runLoop.contains(port, inMode: .default) && !second.runLoop.contains(port, inMode: "other"))
        try port.send(1)
        #expect(delivered.wait())
        #expect(onFirstThread.withLock { $0 } == [true])

        let timer = try SpindleTimer(interval: 3600, repeats: false) { _ in }
        try first.runLoop.add(timer)
        expectSpindleError(.scheduledOnAnotherRunLoop(name: "SpindleTimer")) { try second.runLoop.add(timer) }
        #expect(first.runLoop.contains(timer, inMode: .default) && !second.runLoop.contains(timer, inMode: .default))
        #expect(timer.isValid)

        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let source = try SpindleDescriptorSource(descriptor: fds[0], interest: .readable) { _ in }
        try first.runLoop.add(source)
        expectSpindleError(.scheduledOnAnotherRunLoop(name: "SpindleDescriptorSource(\(fds[0]))")) {
            try second.runLoop.add(source)
        }
        #expect(source.isActive)

        source.cancel()
        timer.invalidate()
        port.invalidate()
        #expect(try first.shutdown(until: T.after(10)))
        #expect(try second.shutdown(until: T.after(10)))
    }
}
