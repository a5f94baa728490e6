import CShim
import Glibc
import Spindle
import Testing

// SEMANTICS.md Part 2, section L (items 87–100), with Spindle's decisions from Part 1 item 12.
@Suite("RunLoop semantics (L 87–100)")
struct RunLoopSemanticsTests {
    typealias T = RunLoopTestSupport

    @Test("87: a thread's loop is made lazily, is the same on every access, and differs between threads")
    func currentIsPerThread() throws {
        let loops = RLBox<[ObjectIdentifier]>([])
        for _ in 0..<2 {
            try T.onNewThread {
                let first = SpindleRunLoop.current
                guard first === SpindleRunLoop.current else { throw TestFailure(message: "current changed") }
                guard first !== SpindleRunLoop.main, first.isOwnedByCurrentThread,
                      !SpindleRunLoop.main.isOwnedByCurrentThread
                else { throw TestFailure(message: "ownership wrong") }
                loops.withLock { $0.append(ObjectIdentifier(first)) }
            }
        }
        let ids = loops.withLock { $0 }
        #expect(ids.count == 2)
        #expect(SpindleRunLoop.main === SpindleRunLoop.main)
    }

    @Test("88: running a loop from a thread that does not own it throws runLoopNotOwned")
    func runningForeignLoopThrows() throws {
        let handOver = try SpindleSemaphore(value: 0)
        let done = try SpindleSemaphore(value: 0)
        let box = RLBox<SpindleRunLoop?>(nil)
        let owner = try T.spawn {
            box.withLock { $0 = SpindleRunLoop.current }
            handOver.signal()
            _ = done.wait(timeout: .seconds(10))
        }
        #expect(handOver.wait(timeout: .seconds(10)))
        let loop = try #require(box.withLock { $0 })
        try T.onNewThread {
            for attempt in 0..<4 {
                do {
                    switch attempt {
                    case 0: _ = try loop.runOnce(before: .now)
                    case 1: try loop.run(until: .now)
                    case 2: try loop.run()
                    default: _ = try SpindleRunLoop.main.runOnce(before: .now)
                    }
                    throw TestFailure(message: "attempt \(attempt) did not throw")
                } catch SpindleError.runLoopNotOwned {
                    continue
                }
            }
        }
        done.signal()
        try owner.join()
    }

    @Test("89: a mode with no sources returns at once; limitDate is nil")
    func emptyLoopReturnsAtOnce() throws {
        let elapsed = RLBox<[Double]>([])
        let limit = RLBox<SpindleDeadline??>(nil)
        try T.onNewThread {
            let loop = SpindleRunLoop.current
            var start = cshim_clock_monotonic_ns()
            let handled = try loop.runOnce(before: T.after(10))
            elapsed.withLock { $0.append(T.seconds(since: start)) }
            if handled { throw TestFailure(message: "runOnce reported a handled source") }
            start = cshim_clock_monotonic_ns()
            try loop.run(until: T.after(10))
            try loop.run()
            elapsed.withLock { $0.append(T.seconds(since: start)) }
            limit.withLock { $0 = .some(loop.limitDate(forMode: .default)) }
            if loop.currentMode != nil { throw TestFailure(message: "currentMode outside a run") }
        }
        #expect(elapsed.withLock { $0 }.allSatisfy { $0 < 5 })
        #expect(limit.withLock { $0 } == .some(nil))
    }

    @Test("90: limitDate is the timer's fire date; with only a port it is distantFuture")
    func limitDateFollowsTimers() throws {
        try T.onNewThread {
            let loop = SpindleRunLoop.current
            let port = SpindlePort<Int>(name: "limit") { _ in }
            try loop.add(port, forMode: .default)
            guard loop.limitDate(forMode: .default) == .distantFuture else {
                throw TestFailure(message: "port only: limitDate should be distantFuture")
            }
            guard loop.limitDate(forMode: "other") == nil else { throw TestFailure(message: "other mode not empty") }
            let timer = try SpindleTimer(interval: 2, repeats: false) { _ in }
            try loop.add(timer, forMode: .default)
            let fire = try #require(timer.fireDate)
            let limit = try #require(loop.limitDate(forMode: .default))
            let difference = Int64(bitPattern: limit.uptimeNanoseconds &- fire.uptimeNanoseconds)
            if abs(difference) > 10_000_000 { throw TestFailure(message: "limitDate \(limit) vs fire \(fire)") }
            timer.invalidate()
            port.invalidate()
        }
    }

    @Test("91: a due timer fires when the loop runs until a past date, and the call returns fast")
    func dueTimerFiresOnPastDeadline() throws {
        let fired = CallRecorder()
        let elapsed = RLBox(0.0)
        try T.onNewThread {
            let loop = SpindleRunLoop.current
            let timer = try SpindleTimer(interval: 0.001, repeats: false) { _ in fired.record() }
            try loop.add(timer, forMode: .default)
            let fire = try #require(timer.fireDate)
            while !fire.hasPassed {}  // a 1 ms spin so the timer is due: not a wait for another thread
            let start = cshim_clock_monotonic_ns()
            try loop.run(until: .now)
            elapsed.withLock { $0 = T.seconds(since: start) }
        }
        #expect(fired.count == 1)
        // A past date: the run serves what is due and returns, without waiting (a generous bound, not a speed
        // target: a run that slept would sit here until a wakeup that never comes).
        #expect(elapsed.withLock { $0 } < 5)
    }

    @Test("92 + 100: a timer in a custom mode fires one interval after it is added, not at once")
    func customModeTimerFiresAfterOneInterval() throws {
        let fired = CallRecorder()
        let result = RLBox<(handled: Bool, elapsed: Double, firedAt: Double)>((true, 0, 0))
        try T.onNewThread {
            let loop = SpindleRunLoop.current
            let start = cshim_clock_monotonic_ns()
            let firedAt = RLBox(0.0)
            let timer = try SpindleTimer(interval: 0.3, repeats: false) { _ in
                fired.record()
                firedAt.withLock { $0 = T.seconds(since: start) }
            }
            try loop.add(timer, forMode: "custom")
            let handled = try loop.runOnce(mode: "custom", before: T.after(5))
            result.withLock { $0 = (handled, T.seconds(since: start), firedAt.withLock { $0 }) }
        }
        let (handled, elapsed, firedAt) = result.withLock { $0 }
        #expect(fired.count == 1)
        #expect(!handled)  // a timer is not an input source; the mode then ran out of sources
        #expect(firedAt >= 0.3)
        #expect(elapsed < 5)
    }

    @Test("93: timer firings alone do not end runOnce; a port message does")
    func timersDoNotEndRunOnce() throws {
        let fired = CallRecorder()
        let received = CallRecorder()
        let ready = try SpindleSemaphore(value: 0)
        let portBox = RLBox<SpindlePort<Int>?>(nil)
        let outcome = RLBox<(first: Bool, firstElapsed: Double, second: Bool)>((true, 0, false))
        let loopThread = try T.spawn {
            let loop = SpindleRunLoop.current
            let port = SpindlePort<Int>(name: "93") { _ in received.record() }
            try? loop.add(port, forMode: .default)
            guard let timer = try? SpindleTimer(interval: 0.02, repeats: true, handler: { _ in fired.record() })
            else { return }
            try! loop.add(timer, forMode: .default)
            let start = cshim_clock_monotonic_ns()
            let first = (try? loop.runOnce(before: T.after(0.3))) ?? true
            let firstElapsed = T.seconds(since: start)
            portBox.withLock { $0 = port }
            ready.signal()
            let second = (try? loop.runOnce(before: T.after(10))) ?? false
            outcome.withLock { $0 = (first, firstElapsed, second) }
            timer.invalidate()
            port.invalidate()
        }
        #expect(ready.wait(timeout: .seconds(10)))
        try portBox.withLock { $0 }?.send(1)
        try loopThread.join()
        let (first, firstElapsed, second) = outcome.withLock { $0 }
        #expect(!first)
        #expect(firstElapsed >= 0.3)
        #expect(fired.count >= 2)
        #expect(second)
        #expect(received.count == 1)
    }

    @Test("94: currentMode is the mode being run inside callouts and nil outside; common-mode timers fire in default")
    func currentModeAndCommonModes() throws {
        let seen = RLBox<[String]>([])
        try T.onNewThread {
            let loop = SpindleRunLoop.current
            let common = try SpindleTimer(interval: 0.01, repeats: false) { _ in
                seen.withLock { $0.append("common:" + (SpindleRunLoop.current.currentMode?.name ?? "nil")) }
            }
            try loop.add(common, forMode: .common)
            try loop.run(until: T.after(10))
            let custom: SpindleRunLoop.Mode = "tracking"
            let skipped = try SpindleTimer(interval: 0.01, repeats: false) { _ in
                seen.withLock { $0.append("x:" + (SpindleRunLoop.current.currentMode?.name ?? "nil")) }
            }
            try loop.add(skipped, forMode: .common)
            // "tracking" is not a common mode yet: running it serves nothing, so it returns at once.
            try loop.run(until: T.after(10), mode: custom)
            loop.addCommonMode(custom)
            try loop.run(until: T.after(10), mode: custom)
            seen.withLock { $0.append("after:" + (loop.currentMode?.name ?? "nil")) }
        }
        #expect(seen.withLock { $0 } == ["common:" + SpindleRunLoop.Mode.default.name, "x:tracking", "after:nil"])
    }

    @Test("95: a perform from another thread wakes the loop promptly")
    func performWakesLoop() throws {
        let ran = CallRecorder()
        let ready = try SpindleSemaphore(value: 0)
        let loopBox = RLBox<SpindleRunLoop?>(nil)
        let outcome = RLBox<(Bool, Double)>((false, 99))
        let loopThread = try T.spawn {
            let loop = SpindleRunLoop.current
            let port = SpindlePort<Int>(name: "keepalive") { _ in }
            try? loop.add(port, forMode: .default)
            loopBox.withLock { $0 = loop }
            ready.signal()
            let start = cshim_clock_monotonic_ns()
            let handled = (try? loop.runOnce(before: T.after(10))) ?? false
            outcome.withLock { $0 = (handled, T.seconds(since: start)) }
            port.invalidate()
        }
        #expect(ready.wait(timeout: .seconds(10)))
        let loop = try #require(loopBox.withLock { $0 })
        loop.perform { ran.record() }
        try loopThread.join()
        let (handled, elapsed) = outcome.withLock { $0 }
        #expect(handled)
        #expect(ran.count == 1)
        #expect(ran.threads.first == loopThread.threadID)
        #expect(elapsed < 5)
    }

    @Test("96: a perform on a loop with no other inputs runs; lower order runs first")
    func performWithoutOtherInputs() throws {
        let order = RLBox<[Int]>([])
        try T.onNewThread {
            let loop = SpindleRunLoop.current
            loop.perform(order: 2) { order.withLock { $0.append(2) } }
            loop.perform(order: 1) { order.withLock { $0.append(1) } }
            loop.perform(inModes: ["elsewhere"]) { order.withLock { $0.append(99) } }
            loop.perform(order: 1) { order.withLock { $0.append(11) } }
            guard try loop.runOnce(before: T.after(10)) else { throw TestFailure(message: "perform not handled") }
        }
        #expect(order.withLock { $0 } == [1, 11, 2])
    }

    @Test("97: adding a port twice schedules it once; a second mode schedules it there; invalidation drops it")
    func addingAndRemovingPorts() throws {
        let weakPort = RLBox<WeakBox>(WeakBox())
        try T.onNewThread {
            let loop = SpindleRunLoop.current
            var port: SpindlePort<Int>? = SpindlePort<Int>(name: "97") { _ in }
            try loop.add(port!, forMode: .default)
            try loop.add(port!, forMode: .default)
            try loop.add(port!, forMode: "second")
            loop.remove(port!, forMode: .default)
            guard !loop.contains(port!, inMode: .default), loop.contains(port!, inMode: "second") else {
                throw TestFailure(message: "modes wrong after remove")
            }
            try loop.add(port!, forMode: .default)
            port!.invalidate()
            guard !loop.contains(port!, inMode: .default), !loop.contains(port!, inMode: "second") else {
                throw TestFailure(message: "invalidated port still scheduled")
            }
            weakPort.withLock { $0.object = port }
            port = nil
            _ = try loop.runOnce(before: T.after(10))  // retires the port on this thread
            do {
                try loop.add(SpindlePort<Int>(name: "dead") { _ in } .invalidated(), forMode: .default)
                throw TestFailure(message: "adding an invalidated port did not throw")
            } catch SpindleError.portInvalidated {}
        }
        #expect(weakPort.withLock { $0.object } == nil)
    }

    @Test("98: 128 ports each receive exactly their payload through the run loop")
    func manyPortsDeliverTheirPayload() throws {
        let received = RLBox<[Int: [Int]]>([:])
        try T.onNewThread {
            let loop = SpindleRunLoop.current
            var ports: [SpindlePort<Int>] = []
            for index in 0..<128 {
                let port = SpindlePort<Int>(name: "p\(index)") { payload in
                    received.withLock { $0[index, default: []].append(payload) }
                }
                try loop.add(port, forMode: .default)
                ports.append(port)
            }
            let allPorts = ports
            let sender = try T.spawn {
                for (index, port) in allPorts.enumerated() { try? port.send(index * 7) }
            }
            let deadline = T.after(10)
            while received.withLock({ $0.values.reduce(0) { $0 + $1.count } }) < 128, !deadline.hasPassed {
                _ = try loop.runOnce(before: deadline)
            }
            try sender.join()
            for port in ports { port.invalidate() }
            try loop.run(until: T.after(10))
        }
        let map = received.withLock { $0 }
        #expect(map.count == 128)
        #expect(map.allSatisfy { $0.value == [$0.key * 7] })
    }

    @Test("99: the main loop can be obtained anywhere but only the main thread runs it")
    @MainActor
    func mainLoop() throws {
        if !SpindleThread.isMainThread {
            #expect(throws: SpindleError.self) { try SpindleRunLoop.main.runOnce(before: .now) }
            return
        }
        let ran = CallRecorder()
        let poster = try T.spawn { SpindleRunLoop.main.perform { ran.record() } }
        try poster.join()
        #expect(try SpindleRunLoop.main.runOnce(before: T.after(10)))
        let timer = try SpindleTimer(interval: 0.01, repeats: false) { _ in ran.record() }
        try SpindleRunLoop.main.add(timer, forMode: .default)
        try SpindleRunLoop.main.run(until: T.after(10))
        #expect(ran.count == 2)
    }
}

/// Holds an object weakly (to check it was freed).
struct WeakBox {
    weak var object: AnyObject?
}

extension SpindlePort {
    /// The port, invalidated (for one-liners in tests).
    func invalidated() -> SpindlePort {
        self.invalidate()
        return self
    }
}
