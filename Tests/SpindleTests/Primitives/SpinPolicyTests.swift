@testable import Spindle
import CShim
import Testing

/// `SpinPolicy`'s decisions, fed sequences of idle gaps and missed spins: no clock, no threads. The expected
/// numbers follow the state machine in SpinPolicy's doc comment (window 16 µs, gapCap 24 µs, missLimit 2, each new
/// gap weighing 1/2 in a mean rounded up).
@Suite("SpinPolicy")
struct SpinPolicyTests {
    private static let window = SpinPolicy.window
    private static let gapCap = SpinPolicy.gapCap

    /// A policy fed `gaps` in order (from new).
    private func fed(_ gaps: [UInt64], to start: SpinPolicy = SpinPolicy()) -> SpinPolicy {
        var policy = start
        for gap in gaps { policy.workArrived(afterIdleNanos: gap) }
        return policy
    }

    /// A policy with no misses whose estimate is exactly `target` (gaps of 0 until one last gap lands on it).
    private func policy(withEstimate target: UInt64) throws -> SpinPolicy {
        var policy = SpinPolicy()
        while policy.estimateNanos > 2 * target { policy.workArrived(afterIdleNanos: 0) }
        // (e + (2t - e) + 1) / 2 == t
        policy.workArrived(afterIdleNanos: 2 * target - policy.estimateNanos)
        try #require(policy.estimateNanos == target)
        try #require(policy.misses == 0)
        return policy
    }

    @Test("the constants the state machine is described with")
    func constants() {
        #expect(Self.window == 16_000)
        #expect(Self.gapCap == 24_000)
        #expect(SpinPolicy.missLimit == 2)
    }

    @Test("a new policy is COLD: budget 0, estimate at the cap, no misses")
    func newIsCold() {
        let policy = SpinPolicy()
        #expect(policy.budgetNanos == 0)
        #expect(policy.estimateNanos == Self.gapCap)
        #expect(policy.misses == 0)
    }

    @Test("two gaps of 4 µs make a new policy WARM: budget == window")
    func shortGapsWarm() {
        let once = fed([4_000])
        #expect(once.estimateNanos == 14_000)  // (24,000 + 4,000) / 2
        #expect(once.budgetNanos == Self.window)
        let twice = fed([4_000, 4_000])
        #expect(twice.estimateNanos == 9_000)
        #expect(twice.budgetNanos == Self.window)
    }

    @Test("from WARM (two 4 µs gaps), a single gap of 500 µs makes it COLD")
    func oneLongGapCools() {
        let warm = fed([4_000, 4_000])
        #expect(warm.budgetNanos == Self.window)
        let cooled = fed([500_000], to: warm)
        #expect(cooled.estimateNanos == 16_500)  // (9,000 + 24,000 capped) / 2
        #expect(cooled.budgetNanos == 0)
    }

    @Test("deeply WARM (estimate <= window / 2): one 500 µs gap keeps it WARM, a second makes it COLD")
    func deeplyWarmNeedsTwoLongGaps() {
        let warm = fed(Array(repeating: 1_000, count: 20))
        #expect(warm.estimateNanos <= Self.window / 2)
        let once = fed([500_000], to: warm)
        #expect(once.budgetNanos == Self.window)
        let twice = fed([500_000], to: once)
        #expect(twice.budgetNanos == 0)
    }

    @Test("a sustained 500 µs pace never warms a new policy, and cools a WARM one for good")
    func sustainedSlowPaceStaysCold() {
        var policy = SpinPolicy()
        for gap in 0..<1_000 {
            policy.workArrived(afterIdleNanos: 500_000)
            #expect(policy.budgetNanos == 0, "spun at slow gap \(gap)")
            #expect(policy.estimateNanos == Self.gapCap)
        }
        policy = fed(Array(repeating: 0, count: 10))
        #expect(policy.budgetNanos == Self.window)
        var coldAfter: Int? = nil
        for gap in 1...1_000 {
            policy.workArrived(afterIdleNanos: 500_000)
            if policy.budgetNanos == 0, coldAfter == nil { coldAfter = gap }
            if coldAfter != nil { #expect(policy.budgetNanos == 0, "warmed again at slow gap \(gap)") }
        }
        #expect(coldAfter == 2)  // estimate ~0 <= window / 2: two capped gaps
    }

    @Test("missLimit (2) spins missed in a row make it COLD even with a short estimate; a short gap re-warms it")
    func missesCoolAndShortGapRewarms() {
        var policy = fed(Array(repeating: 0, count: 10))
        let estimate = policy.estimateNanos
        #expect(policy.budgetNanos == Self.window)
        policy.spinMissed()
        #expect(policy.misses == 1)
        #expect(policy.budgetNanos == Self.window)  // one miss is allowed
        policy.spinMissed()
        #expect(policy.misses == 2)
        #expect(policy.budgetNanos == 0)
        #expect(policy.estimateNanos == estimate)  // misses do not touch the estimate
        // A gap longer than the window does not clear the misses, even though the estimate stays short.
        policy.workArrived(afterIdleNanos: Self.window + 1)
        #expect(policy.estimateNanos <= Self.window)
        #expect(policy.budgetNanos == 0)
        // A short gap does.
        policy.workArrived(afterIdleNanos: 1_000)
        #expect(policy.misses == 0)
        #expect(policy.budgetNanos == Self.window)
    }

    @Test("misses count only in a row: a short gap between two misses resets the count")
    func missesMustBeConsecutive() {
        var policy = fed([0, 0])
        policy.spinMissed()
        policy.workArrived(afterIdleNanos: 500)
        policy.spinMissed()
        #expect(policy.misses == 1)
        #expect(policy.budgetNanos == Self.window)
    }

    @Test("many misses saturate instead of overflowing; one short gap still re-warms")
    func missesSaturate() {
        var policy = fed([0, 0])
        for _ in 0..<1_000 { policy.spinMissed() }
        #expect(policy.misses == UInt8.max)
        #expect(policy.budgetNanos == 0)
        policy.workArrived(afterIdleNanos: 0)
        #expect(policy.budgetNanos == Self.window)
    }

    // MARK: - Boundaries

    @Test("estimate exactly at the window is WARM, one nanosecond above is COLD")
    func windowBoundary() throws {
        #expect(try policy(withEstimate: Self.window).budgetNanos == Self.window)
        #expect(try policy(withEstimate: Self.window + 1).budgetNanos == 0)
    }

    @Test("from new, one gap of window / 2 (8 µs) warms it; 8,001 ns does not")
    func oneGapBoundary() {
        #expect(fed([Self.window / 2]).estimateNanos == Self.window)
        #expect(fed([Self.window / 2]).budgetNanos == Self.window)
        #expect(fed([Self.window / 2 + 1]).budgetNanos == 0)
    }

    @Test("from new, two gaps of 13,333 ns (window * 5 / 6) warm it; two of 13,334 ns do not")
    func twoGapBoundary() {
        let limit = Self.window * 5 / 6
        #expect(limit == 13_333)
        #expect(fed([limit]).budgetNanos == 0)
        #expect(fed([limit, limit]).budgetNanos == Self.window)
        #expect(fed([limit + 1, limit + 1]).budgetNanos == 0)
    }

    @Test("one capped gap cools a WARM policy exactly when its estimate was above window / 2")
    func coolingBoundary() throws {
        let atHalf = try policy(withEstimate: Self.window / 2)
        #expect(atHalf.budgetNanos == Self.window)
        #expect(fed([Self.gapCap], to: atHalf).budgetNanos == Self.window)
        #expect(fed([Self.gapCap, Self.gapCap], to: atHalf).budgetNanos == 0)
        let aboveHalf = try policy(withEstimate: Self.window / 2 + 1)
        #expect(aboveHalf.budgetNanos == Self.window)
        #expect(fed([Self.gapCap], to: aboveHalf).budgetNanos == 0)
    }

    @Test("a gap of exactly the window clears the misses; one nanosecond more does not")
    func missClearingBoundary() {
        var missed = fed([0, 0])
        missed.spinMissed()
        missed.spinMissed()
        #expect(missed.budgetNanos == 0)
        #expect(fed([Self.window], to: missed).misses == 0)
        #expect(fed([Self.window], to: missed).budgetNanos == Self.window)  // estimate (3,000 + 8,000) / 2
        #expect(fed([Self.window + 1], to: missed).misses == 2)
        #expect(fed([Self.window + 1], to: missed).budgetNanos == 0)
    }

    @Test("gaps count as at most gapCap: a huge gap weighs no more than the cap, and nothing overflows")
    func gapsAreCapped() {
        let warm = fed([0, 0])
        #expect(fed([UInt64.max], to: warm) == fed([Self.gapCap], to: warm))
        #expect(fed([Self.gapCap + 1], to: warm) == fed([Self.gapCap], to: warm))
        #expect(fed([UInt64.max, UInt64.max]).estimateNanos == Self.gapCap)
    }

    @Test("the estimate never exceeds gapCap and the budget is always 0 or window (seeded random sequences)")
    func estimateBounded() {
        var rng = SplitMix64(seed: 0x5EED_0017)
        for _ in 0..<20 {
            var policy = SpinPolicy()
            for _ in 0..<1_000 {
                let roll = rng.next()
                switch roll % 8 {
                case 0: policy.spinMissed()
                case 1: policy.workArrived(afterIdleNanos: UInt64.max - roll % 1_000)
                case 2, 3: policy.workArrived(afterIdleNanos: roll % 1_000_000_000)
                default: policy.workArrived(afterIdleNanos: roll % (2 * Self.gapCap))
                }
                #expect(policy.estimateNanos <= Self.gapCap)
                #expect(policy.budgetNanos == 0 || policy.budgetNanos == Self.window)
            }
        }
    }
}

/// `SpinPolicy.spin`, the one spin loop: each way it can end, decided without waiting on a clock (a budget of 0
/// or a deadline already past ends it at the first clock read).
@Suite struct SpinLoopTests {
    @Test func anEventAlreadyThereEndsTheSpinAtOnce() {
        var polls = 0
        let end = SpinPolicy.spin(from: cshim_clock_monotonic_ns(), budget: .max) {
            polls += 1
            return true
        }
        #expect(end == .seen && polls == 1)
    }

    @Test func anEventThatComesWhileSpinningIsSeen() {
        var polls = 0
        let end = SpinPolicy.spin(from: cshim_clock_monotonic_ns(), budget: .max, yielding: true) {
            polls += 1
            return polls == 5
        }
        #expect(end == .seen && polls == 5)
    }

    @Test func aSpentBudgetEndsTheSpinWithoutTheEvent() {
        for yielding in [false, true] {
            var polls = 0
            let end = SpinPolicy.spin(from: cshim_clock_monotonic_ns(), budget: 0, yielding: yielding) {
                polls += 1
                return false
            }
            #expect(end == .budgetSpent)
            #expect(polls == (yielding ? 1 : SpinPolicy.roundsPerClockRead))  // ends at its first clock read
        }
    }

    @Test func aPassedDeadlineWinsOverTheBudget() {
        let end = SpinPolicy.spin(from: cshim_clock_monotonic_ns(), budget: 0, until: 0) { false }
        #expect(end == .deadlinePassed)
    }
}
