import Testing

@testable import Spindle

/// `WorkerState`: an idle spell ends once, and the gap it reports is up to the work's arrival (the signal's time)
/// when the worker was woken for it. The clock is real, but only orderings are asserted.
@Suite struct WorkerStateTests {
    @Test func aSpellWokenBySignalReportsTheSignalTimeNotTheWakeLatency() {
        var state = WorkerState()
        state.wentIdle()
        let since = state.idleSince!
        state.wentIdle()  // still the same spell
        #expect(state.idleSince == since)
        // Woken for work that arrived at the moment the spell began: a gap of 0 is reported, however late the
        // worker got to run, so one such spell makes a new (COLD) policy WARM (see SpinPolicy).
        state.maySpin = false
        state.woke(workArrivedAt: since)
        #expect(state.maySpin)
        state.gotWork()
        #expect(state.idleSince == nil)
        #expect(state.policy.estimateNanos == SpinPolicy.gapCap / 2)
        #expect(state.policy.budgetNanos == SpinPolicy.window)
        state.gotWork()  // not idle: nothing to report
        #expect(state.policy.estimateNanos == SpinPolicy.gapCap / 2)
    }

    @Test func aSignalFromBeforeTheSpellIsIgnored() {
        var state = WorkerState()
        state.wentIdle()
        state.woke(workArrivedAt: 0)  // a signal decided before this spell began (or none yet)
        #expect(state.workArrivedAt == nil)
    }
}
