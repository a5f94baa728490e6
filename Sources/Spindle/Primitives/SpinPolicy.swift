import CShim
import Glibc

/// Decides how long a thread that just ran out of work should spin before it parks, from the gaps it saw between
/// going idle and the next work. Shared by the queue workers (of a queue of width 1: `IdleWorkers.spinningAllowed`),
/// `SpindleSemaphore` and the run loop's wakeup. The
/// policy is pure: no clock, no atomics; the caller measures and reports (so the decisions are tested by feeding it
/// gaps). `SpinPolicy.spin` (below) is the one loop that carries a decision out.
///
/// Why: spinning pays only when the next event comes inside the spin window; then it saves a park and a wake
/// (a futex round trip, several microseconds of CPU on each side on a virtual machine) and starts the work
/// sooner. When the next event comes later, every nanosecond spun is wasted and the park is paid anyway. A
/// lightly loaded service (an event every 50 µs or more) must not spin at all; a hand-off inside a burst should.
///
/// Owner: one thread (a worker's per-thread state, the run loop's wakeup), or one lock (`SpindleSemaphore` keeps
/// one per semaphore under its mutex). The policy has no synchronisation of its own.
///
/// State: `estimateNanos`, a moving average of recent gaps (each new gap weighs 1/2, the mean rounded up, and
/// counts as at most `gapCap`, so one long idle spell cools the policy without making it forget short gaps for
/// long); and `misses`, the spins in a row that ended with nothing. What a gap is: from going idle until the work
/// *arrived* (for a parked thread, when the waker decided to wake it, not when it got to run), which is what a
/// spin would have waited.
///
/// State machine (`budgetNanos` is the decision):
/// - COLD (`estimateNanos > window` or `misses >= missLimit`): budget 0, park at once. A new policy is COLD
///   (`estimateNanos == gapCap`): at light load a thread never spins.
/// - WARM (`estimateNanos <= window` and `misses < missLimit`): spin for up to `window`.
/// Transitions:
/// - `workArrived(afterIdleNanos: g)` folds `g` into the average, and clears `misses` when `g <= window`.
///   From the cap, one gap of at most `window / 2` (8 µs), or two of at most 13,333 ns (`window * 5 / 6`), make
///   it WARM. A WARM policy turns COLD after one gap of `gapCap` or more if its estimate was above `window / 2`,
///   after two otherwise. (These bounds are exact because the mean is rounded up.)
/// - `spinMissed()` counts a spin that found nothing: `missLimit` (2) in a row make it COLD until a gap of at
///   most `window` is seen again.
///
/// Numbers: `window` is 16 µs, about what a park and its wake cost together in CPU here, so a spin that catches
/// the work never costs more than the park it saves, and one that misses costs at most about double (the
/// rent-or-buy bound). `gapCap` is 1.5 × `window`. On the 2-vCPU virtual machine the benchmarks run on, each time a
/// CPU went idle between a hand-off and the next cost about 10–16 µs of the process's CPU clock (the futex wait and
/// wake, and the vCPU's halt and wakeup billed to the threads): a round-trip probe's CPU per trip against its idle
/// entries per trip, three ways (BENCHMARKS.md, "The spin window"). The window was 8 µs before that measurement.
struct SpinPolicy: Sendable, Equatable {
    /// The longest spin, in nanoseconds.
    static let window: UInt64 = 16_000
    /// A gap counts as at most this much in the average.
    static let gapCap: UInt64 = 3 * window / 2
    /// Spins in a row that may end with nothing before the policy turns COLD.
    static let missLimit: UInt8 = 2

    /// The moving average of recent idle gaps, in nanoseconds (starts at `gapCap`: COLD).
    private(set) var estimateNanos: UInt64 = SpinPolicy.gapCap
    /// Spins in a row that ended with nothing.
    private(set) var misses: UInt8 = 0

    init() {}

    /// How long to spin now, in nanoseconds: `window` when WARM, 0 when COLD.
    var budgetNanos: UInt64 {
        (self.misses < SpinPolicy.missLimit && self.estimateNanos <= SpinPolicy.window) ? SpinPolicy.window : 0
    }

    /// Work arrived `gap` nanoseconds after the thread went idle (caught by a spin, or found after a park).
    mutating func workArrived(afterIdleNanos gap: UInt64) {
        let sample = min(gap, SpinPolicy.gapCap)
        // Rounded up, so the boundaries above hold to the nanosecond (rounding down let 4,001 ns warm a new policy).
        self.estimateNanos = (self.estimateNanos + sample + 1) / 2
        if gap <= SpinPolicy.window { self.misses = 0 }
    }

    /// A spin used its whole budget and found nothing (the thread parks next).
    mutating func spinMissed() {
        if self.misses < UInt8.max { self.misses += 1 }
    }
}

/// How a bounded spin ended (see `SpinPolicy.spin`).
enum SpinOutcome: Equatable {
    /// The awaited event showed.
    case seen
    /// The whole budget passed without it.
    case budgetSpent
    /// The caller's deadline passed first.
    case deadlinePassed
}

extension SpinPolicy {
    /// Spin rounds (8 spin-wait hints each) between two reads of the clock when not yielding: a spin overshoots its
    /// budget by at most 32 hints (about 1 µs where a hint costs ~30 ns).
    static let roundsPerClockRead = 4

    /// Spindle's one spin loop, for every thread about to sleep (queue workers, semaphore waiters, run loops):
    /// polls `arrived` until it returns true, `budget` ns have passed since `start`, or `deadline` (monotonic ns)
    /// passes, with 8 spin-wait hints per round. `arrived` must not block or take a lock (it reads a hint; the
    /// caller re-checks under its lock). `yielding`: give the CPU away every round (`sched_yield`, which returns at
    /// once when nothing else wants it) and read the clock every round, for a spinner whose event is brought by a
    /// thread that may be waiting for this very CPU (a queue's adder, on 2 cores). The deadline is checked before
    /// the budget.
    @inline(__always)
    static func spin(
        from start: UInt64, budget: UInt64, until deadline: UInt64 = .max, yielding: Bool = false,
        _ arrived: () -> Bool
    ) -> SpinOutcome {
        var round = 0
        while true {
            if arrived() { return .seen }
            for _ in 0..<8 { cshim_cpu_relax() }
            if yielding { sched_yield() }
            round &+= 1
            if yielding || round % SpinPolicy.roundsPerClockRead == 0 {
                let now = cshim_clock_monotonic_ns()
                if now >= deadline { return .deadlinePassed }
                if now &- start >= budget { return .budgetSpent }
            }
        }
    }
}
