import Testing

@testable import Spindle

/// `SpindleRunLoop.add(_: SpindleTimer)` from another thread wakes the loop, so a loop asleep with nothing due
/// recomputes its sleep and fires the new timer on time.
@Suite struct MutationAuditRunLoopTimerTests {
    @Test func aTimerAddedFromAnotherThreadWhileTheLoopSleepsFires() throws {
        let loopThread = try SpindleRunLoopThread(name: "rl-timer-add")
        let tid = loopThread.thread.threadID
        // Asleep in the kernel with nothing registered (a /proc fact, with no signal to wait on: polled).
        #expect(qtWaitUntil { qtThreadState(tid) == "S" })
        let fired = QTGate()
        let timer = try SpindleTimer(interval: 0.01, repeats: false) { _ in fired.open() }
        try loopThread.runLoop.add(timer, forMode: .default)
        #expect(fired.wait(), "the timer did not fire: the sleeping loop was not woken")
        try loopThread.shutdown()
    }
}
