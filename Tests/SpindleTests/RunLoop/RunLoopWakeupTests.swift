import CShim
import Glibc
@testable import Spindle
import Testing

/// `RunLoopWakeup`'s spin policy: the signallers' stamp of the first signal of an idle wait, and what the owner
/// reports to its `SpinPolicy`. Each test owns a private wakeup and acts as its owner thread; gaps are made
/// exact by choosing the idle start relative to the stamp, so no assertion depends on scheduling.
@Suite("RunLoopWakeup spin policy", .timeLimit(.minutes(1)))
struct RunLoopWakeupTests {
    @Test("a new wakeup is COLD and not idle; a signal while the owner is busy stamps nothing")
    func busySignalsAreNotStamped() {
        let wakeup = RunLoopWakeup()
        #expect(wakeup.spinPolicy == SpinPolicy())
        #expect(wakeup.spinPolicy.budgetNanos == 0)
        #expect(wakeup.firstSignalAt.load(ordering: .relaxed) == RunLoopWakeup.notIdle)
        wakeup.signal()
        #expect(wakeup.firstSignalAt.load(ordering: .relaxed) == RunLoopWakeup.notIdle)
        wakeup.drain()
    }

    @Test("while the owner waits, the first signal stamps its time and later signals keep it")
    func firstSignalIsStamped() {
        let wakeup = RunLoopWakeup()
        wakeup.firstSignalAt.store(RunLoopWakeup.idleUnstamped, ordering: .relaxed)  // as `wait` does
        let before = cshim_clock_monotonic_ns()
        wakeup.signal()
        let after = cshim_clock_monotonic_ns()
        let stamp = wakeup.firstSignalAt.load(ordering: .relaxed)
        #expect(stamp >= before && stamp <= after)
        wakeup.signal()
        #expect(wakeup.firstSignalAt.load(ordering: .relaxed) == stamp)
    }

    @Test("the gap reported is from going idle to the signaller's stamp, not to when the owner noticed")
    func gapIsMeasuredToTheStamp() {
        let wakeup = RunLoopWakeup()
        wakeup.drain()
        wakeup.firstSignalAt.store(RunLoopWakeup.idleUnstamped, ordering: .relaxed)
        wakeup.signal()
        let stamp = wakeup.firstSignalAt.load(ordering: .relaxed)
        // Idle 2 µs before the signal: one gap of 2 µs folds into the cap, (24,000 + 2,000) / 2.
        wakeup.reportWait(idleSince: stamp - 2_000)
        #expect(wakeup.spinPolicy.estimateNanos == 13_000)
        #expect(wakeup.spinPolicy.budgetNanos == SpinPolicy.window)
        #expect(wakeup.firstSignalAt.load(ordering: .relaxed) == RunLoopWakeup.notIdle, "disarmed")
        wakeup.drain()
    }

    @Test("a signal from before the owner went idle (unstamped) reports a gap of zero at most")
    func unstampedSignalReportsNoMoreThanTheWait() {
        let wakeup = RunLoopWakeup()
        wakeup.drain()
        wakeup.signal()  // not idle yet: unstamped
        wakeup.firstSignalAt.store(RunLoopWakeup.idleUnstamped, ordering: .relaxed)
        // An idle start in the future makes the gap "now - idleSince" negative, so exactly 0 is reported.
        wakeup.reportWait(idleSince: cshim_clock_monotonic_ns() + 1_000_000_000)
        #expect(wakeup.spinPolicy.estimateNanos == SpinPolicy.gapCap / 2)
        wakeup.drain()
    }

    @Test("no signal since the last drain: nothing is reported")
    func noSignalReportsNothing() {
        let wakeup = RunLoopWakeup()
        wakeup.signal()
        wakeup.drain()
        wakeup.firstSignalAt.store(RunLoopWakeup.idleUnstamped, ordering: .relaxed)
        wakeup.reportWait(idleSince: 0)
        #expect(wakeup.spinPolicy == SpinPolicy())
        #expect(wakeup.firstSignalAt.load(ordering: .relaxed) == RunLoopWakeup.notIdle)
    }

    @Test("a wait that ends by its deadline reports nothing and leaves the stamp disarmed")
    func timedOutWaitReportsNothing() {
        let wakeup = RunLoopWakeup()
        wakeup.drain()
        var watched: [pollfd] = []
        let deadline = SpindleDeadline.after(.milliseconds(5))
        wakeup.wait(watching: &watched, until: deadline)
        #expect(deadline.hasPassed)
        #expect(wakeup.spinPolicy == SpinPolicy())
        #expect(wakeup.firstSignalAt.load(ordering: .relaxed) == RunLoopWakeup.notIdle)
    }

    @Test("a WARM owner's spin that finds nothing counts a miss; two make it COLD")
    func missedSpinsCool() {
        let wakeup = RunLoopWakeup()
        wakeup.drain()
        wakeup.spinPolicy.workArrived(afterIdleNanos: 0)
        wakeup.spinPolicy.workArrived(afterIdleNanos: 0)
        let warm = wakeup.spinPolicy
        #expect(warm.budgetNanos == SpinPolicy.window)
        var watched: [pollfd] = []
        // Nobody signals: the spin uses its whole budget (16 µs, far inside the deadline), then poll times out.
        wakeup.wait(watching: &watched, until: .after(.milliseconds(100)))
        #expect(wakeup.spinPolicy.misses == 1)
        #expect(wakeup.spinPolicy.estimateNanos == warm.estimateNanos)
        wakeup.wait(watching: &watched, until: .after(.milliseconds(100)))
        #expect(wakeup.spinPolicy.misses == 2)
        #expect(wakeup.spinPolicy.budgetNanos == 0)
    }

    @Test("a signal from another thread ends a COLD owner's poll; the stamp is disarmed after")
    func signalFromAnotherThreadEndsPoll() throws {
        let wakeup = RunLoopWakeup()
        wakeup.drain()
        let signaller = try SpindleThread.spawnJoinable(name: "rl-wakeup") {
            // Once the owner is in `wait` (armed), signal.
            // Bounded, so an owner that never arms fails the test (below) instead of hanging it here.
            let end = monotonicSeconds() + 20
            while wakeup.firstSignalAt.load(ordering: .relaxed) != RunLoopWakeup.idleUnstamped
                && monotonicSeconds() < end { sched_yield() }
            wakeup.signal()
        }
        var watched: [pollfd] = []
        let deadline = SpindleDeadline.after(.seconds(10))
        wakeup.wait(watching: &watched, until: deadline)
        #expect(!deadline.hasPassed, "the signal did not end the wait")
        try signaller.join()
        #expect(wakeup.firstSignalAt.load(ordering: .relaxed) == RunLoopWakeup.notIdle)
        wakeup.drain()
    }
}
