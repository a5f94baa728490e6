import CShim
import Glibc
import Synchronization
import Testing

@testable import Spindle

// Review of Sources/Spindle/RunLoop and Sources/Spindle/Primitives (run loops, ports, timers, primitives). Each test
// here failed on the code it was written against. Nothing sleeps as synchronisation: threads meet on POSIX
// semaphores (`QTGate`) with deadlines.

/// Runs `onDeinit` when released: stands for a user object captured by a timer's handler.
final class RLReviewDeinitProbe: @unchecked Sendable {
    let onDeinit: @Sendable () -> Void
    init(_ onDeinit: @escaping @Sendable () -> Void) { self.onDeinit = onDeinit }
    deinit { self.onDeinit() }
}

@Suite("Review: run loops and primitives", .serialized, .timeLimit(.minutes(2)))
struct RunLoopReviewTests {
    typealias T = RunLoopTestSupport

    /// SpindleRunLoop's contract: "No user code (handlers, blocks, timer callbacks) ever runs with a lock held".
    /// An invalidated timer stays referenced by its stale heap entry (`RunLoopTimerEntry.timer`, lazy deletion);
    /// when that entry is popped (`RunLoopState.nextFire` / `takeDueTimers` / `compact`), under the loop's lock,
    /// the timer, its handler and whatever the handler captured are released there: a captured object's deinit
    /// (user code) runs with the loop's lock held. Here the deinit asks another thread to read the loop's
    /// common modes (which takes that lock) and waits for it: it cannot get the lock while the deinit runs.
    /// (A deinit that calls `loop.perform` or `port.invalidate()` itself relocks the lock: a trap in debug builds,
    /// a self-deadlock in release builds.)
    @Test("a timer's captured state is not released (deinit run) under the run loop's lock")
    func timerHandlerReleasedOutsideTheLoopLock() throws {
        let lockFreeDuringDeinit = RLBox<Bool?>(nil)
        try T.onNewThread("rl-review-release") {
            let loop = SpindleRunLoop.current
            let port = SpindlePort<Int>(name: "keeps the mode busy") { _ in }
            try loop.add(port, forMode: .default)
            let askHelper = QTGate()
            let helperDone = QTGate()
            let helper = try BTThread("rl-review-helper") {
                guard askHelper.wait() else { return }
                _ = loop.commonModes  // takes the loop's lock
                helperDone.open()
            }
            weak var weakTimer: SpindleTimer?
            do {
                let probe = RLReviewDeinitProbe {
                    askHelper.open()
                    let free = helperDone.wait(seconds: 2)
                    lockFreeDuringDeinit.withLock { $0 = free }
                }
                let timer = try SpindleTimer(interval: 60, repeats: false) { _ in _ = probe }
                weakTimer = timer
                try loop.add(timer, forMode: .default)
                timer.invalidate()
            }
            // Only the stale heap entry still holds the timer.
            #expect(weakTimer != nil, "precondition: the stale heap entry keeps the invalidated timer")
            _ = try loop.runOnce(mode: .default, before: .now)
            #expect(weakTimer == nil, "the stale entry was not dropped by a pass")
            if lockFreeDuringDeinit.withLock({ $0 }) == nil { askHelper.open() }  // let the helper finish anyway
            _ = helper.join()
            port.invalidate()
            _ = try loop.runOnce(mode: .default, before: .now)
        }
        let free = lockFreeDuringDeinit.withLock { $0 }
        #expect(free == true,
                "the captured object's deinit ran while the run loop's lock was held (another thread could not take it)")
    }

    /// `deliverDescriptorEvents` acts on the `revents` of a poll made before the pass's callouts. When an earlier
    /// handler of that delivery moves another ready source to another loop (`remove(_:forMode:)` here, `add` there:
    /// documented as allowed), the stale end-of-file is still delivered here: `loopFinish()` marks the source
    /// finished and returns the *new* loop's modes, but only this loop's tables are cleaned. The finished source
    /// stays in the new loop's table for good: that loop polls a hung-up descriptor it will never deliver, so a
    /// run of a mode with nothing else spins at full CPU until its deadline instead of returning at once, and
    /// `run()` there never returns. (The moved source's handler also runs on the old loop's thread.)
    @Test("a source moved to another loop by a sibling's handler is not left finished in the new loop's table")
    func aSourceMovedMidDeliveryIsNotStrandedOnTheNewLoop() throws {
        var pipeA: [Int32] = [-1, -1]
        var pipeB: [Int32] = [-1, -1]
        try #require(pipe(&pipeA) == 0 && pipe(&pipeB) == 0)
        // Both pipes hang up before the run, so the old loop's one poll reports both.
        close(pipeA[1])
        close(pipeB[1])
        let readA = pipeA[0]
        let readB = pipeB[0]
        defer {
            close(readA)
            close(readB)
        }
        let newLoopBox = RLBox<SpindleRunLoop?>(nil)
        let newLoopReady = QTGate()
        let moved = QTGate()
        let newLoopRunSeconds = RLBox<Double>(-1)
        // The new loop's owner: waits until the move happened, then runs its default mode once.
        let newOwner = try BTThread("rl-review-new-loop") {
            newLoopBox.withLock { $0 = SpindleRunLoop.current }
            newLoopReady.open()
            guard moved.wait() else { return }
            let start = cshim_clock_monotonic_ns()
            // A far deadline: the bug polls until it, a fixed loop returns at once (no timing margin needed).
            _ = try? SpindleRunLoop.current.runOnce(mode: .default, before: T.after(30))
            newLoopRunSeconds.withLock { $0 = T.seconds(since: start) }
        }
        #expect(newLoopReady.wait())
        let newLoop = try #require(newLoopBox.withLock { $0 })
        let handlerCalls = RLBox<[String]>([])
        try T.onNewThread("rl-review-old-loop") {
            let oldLoop = SpindleRunLoop.current
            let sources = RLBox<[String: SpindleDescriptorSource]>([:])
            let movedOne = RLBox<String?>(nil)
            func make(_ name: String, _ other: String, _ fd: Int32) throws -> SpindleDescriptorSource {
                try SpindleDescriptorSource(descriptor: fd, interest: .readable) { event in
                    handlerCalls.withLock { $0.append("\(name):\(event)") }
                    // The first handler to run moves its sibling to the new loop.
                    let first = movedOne.withLock { value -> Bool in
                        guard value == nil else { return false }
                        value = other
                        return true
                    }
                    guard first, let sibling = sources.withLock({ $0[other] }) else { return }
                    oldLoop.remove(sibling, forMode: .default)
                    try? newLoop.add(sibling, forMode: .default)
                }
            }
            let a = try make("a", "b", readA)
            let b = try make("b", "a", readB)
            sources.withLock { $0 = ["a": a, "b": b] }
            try oldLoop.add(a, forMode: .default)
            try oldLoop.add(b, forMode: .default)
            _ = try oldLoop.runOnce(mode: .default, before: T.after(2))
            sources.withLock { $0 = [:] }
        }
        moved.open()
        #expect(newOwner.join())
        let seconds = newLoopRunSeconds.withLock { $0 }
        #expect(seconds >= 0 && seconds < 15,
                "the new loop's runOnce took \(seconds) s (a finished source left in its table keeps it polling a hung-up descriptor); handler calls on the old loop: \(handlerCalls.withLock { $0 })")
    }

    /// Resource retention: an invalidated timer stays referenced by its heap entry (`RunLoopTimerEntry.timer`)
    /// until that entry reaches the top of the heap (its old fire date) or a compaction runs (more than
    /// 2 × timers + 64 entries). On a loop kept busy by a short repeating timer, a long timer that is invalidated
    /// at once, and everything its handler captured, is kept for its whole interval (an hour here), although
    /// `invalidate()` "removes it from its run loop" and nothing else references it.
    @Test("an invalidated long timer, and what its handler captured, is released promptly")
    func anInvalidatedLongTimerIsReleasedPromptly() throws {
        let loopThread = try SpindleRunLoopThread(name: "rl-review-retain")
        let ticks = QTGate()
        let ticker = try SpindleTimer(interval: 0.005, repeats: true) { _ in ticks.open() }
        try loopThread.runLoop.add(ticker, forMode: .default)
        #expect(ticks.wait())
        let released = QTGate()
        do {
            let probe = RLReviewDeinitProbe { released.open() }
            let long = try SpindleTimer(interval: 3_600, repeats: false) { _ in _ = probe }
            try loopThread.runLoop.add(long, forMode: .default)
            long.invalidate()
        }
        // The loop keeps running passes (the ticker fires every 5 ms): plenty of chances to let go of it.
        for _ in 0..<20 { _ = ticks.wait() }
        let freed = released.wait(seconds: 2)
        ticker.invalidate()
        try loopThread.shutdown()
        #expect(freed, "the invalidated timer's handler (and its captured object) is still retained by the loop")
    }

    /// The port analog of the stale pass above: a pass's plan lists its ports before any callout runs
    /// (`RunLoopPassPlan.ports`), and delivery does not re-check that a port is still scheduled here. A port that an
    /// earlier handler of the same pass moved to another loop (`remove(_:forMode:)` here, `add` there) still has its
    /// pending messages delivered by this loop, on this thread: SpindlePort promises "a handler receives them on the
    /// thread of the run loop the port is scheduled on" (and with the other loop running, two threads could run
    /// the port's handler at once).
    @Test("a port moved to another loop by a sibling's handler is not delivered on the old loop's thread")
    func aPortMovedMidPassIsNotDeliveredOnTheOldLoop() throws {
        let newLoopBox = RLBox<SpindleRunLoop?>(nil)
        let newLoopReady = QTGate()
        let finish = QTGate()
        // The new loop's owner only makes it; it does not run it during the test.
        let newOwner = try BTThread("rl-review-new-port-loop") {
            newLoopBox.withLock { $0 = SpindleRunLoop.current }
            newLoopReady.open()
            _ = finish.wait()
        }
        #expect(newLoopReady.wait())
        let newLoop = try #require(newLoopBox.withLock { $0 })
        let deliveredAfterMove = RLBox<[String]>([])
        try T.onNewThread("rl-review-old-port-loop") {
            let oldLoop = SpindleRunLoop.current
            let ports = RLBox<[String: SpindlePort<Int>]>([:])
            let movedOne = RLBox<String?>(nil)
            func make(_ name: String, _ other: String) -> SpindlePort<Int> {
                SpindlePort<Int>(name: name) { _ in
                    if movedOne.withLock({ $0 }) == name {
                        deliveredAfterMove.withLock { $0.append(name) }  // moved, yet delivered here
                        return
                    }
                    let first = movedOne.withLock { value -> Bool in
                        guard value == nil else { return false }
                        value = other
                        return true
                    }
                    guard first, let sibling = ports.withLock({ $0[other] }) else { return }
                    oldLoop.remove(sibling, forMode: .default)
                    try? newLoop.add(sibling, forMode: .default)
                }
            }
            let a = make("a", "b")
            let b = make("b", "a")
            ports.withLock { $0 = ["a": a, "b": b] }
            try oldLoop.add(a, forMode: .default)
            try oldLoop.add(b, forMode: .default)
            try a.send(1)
            try b.send(1)
            _ = try oldLoop.runOnce(mode: .default, before: T.after(2))
            ports.withLock { $0 = [:] }
            a.invalidate()
            b.invalidate()
            _ = try? oldLoop.runOnce(mode: .default, before: .now)
        }
        finish.open()
        #expect(newOwner.join())
        let wrong = deliveredAfterMove.withLock { $0 }
        #expect(wrong.isEmpty, "port(s) \(wrong) were delivered on the old loop's thread after moving to another loop")
    }

    /// The consequence of the first test for a deinit that uses the loop itself: releasing an invalidated timer's
    /// stale heap entry under the loop's lock runs the captured object's deinit there, and a deinit that posts to
    /// the loop (`perform`) relocks that lock: a trap (debug: error-checking mutex) or a self-deadlock (release).
    /// Run in a forked child so that the crash does not take the test process down.
    @Test("a deinit that posts to the run loop, run by releasing an invalidated timer, does not crash or hang",
          .disabled(if: forkTestsUnderThreadSanitizer, "forked children hang under ThreadSanitizer"))
    func aDeinitThatPostsToTheLoopDoesNotRelockIt() throws {
        let code = forkChildAndWait(alarmSeconds: 3) {
            let loop = SpindleRunLoop.current
            let port = SpindlePort<Int>(name: "keeps the mode busy") { _ in }
            do { try loop.add(port, forMode: .default) } catch { return 3 }
            do {
                let probe = RLReviewDeinitProbe { _ = loop.perform {} }
                guard let timer = try? SpindleTimer(interval: 60, repeats: false, handler: { _ in _ = probe }) else {
                    return 4
                }
                do { try loop.add(timer, forMode: .default) } catch { return 5 }
                timer.invalidate()
            }
            _ = try? loop.runOnce(mode: .default, before: .now)
            return 0
        }
        #expect(code == 0, "the child died or hung (exit code \(code); negative = killed by that signal)")
    }
}
