import Spindle
import Synchronization

// `timers`: one-shot and repeating SpindleTimers on two run-loop threads, added from the loop thread (in a
// perform) or from other threads.
// - One-shot timers (0 = 0.1 ms up to 20 ms) fire exactly once; some with a long interval are invalidated from
//   another thread right after being added, well before their fire date: they never fire.
// - Repeating timers (0.2–5 ms) are invalidated after k firings, four ways: from their own handler, from a
//   perform on the loop thread, from another thread, and from a sibling timer's handler (two timers with the same
//   interval added back to back, so both often come due in the same pass). When invalidate() returned on the loop
//   thread, the timer never fires again; from another thread, at most one firing the loop had already decided may
//   still run (the documented "firing already begun"): more is a violation.
// - No timer fires before its fire date: the n-th firing is at or after (time before add) + n × interval, on
//   CLOCK_MONOTONIC. Every handler runs on its loop's thread.
// - No one-shot timer fires more than `TimersScenario.lateBoundNs` (500 ms) after its fire date.
// Figure: the largest one-shot lateness (fire time minus fire date), and late firings seen after a cross-thread
// invalidate.

/// What one timer saw.
final class TimerProbe: @unchecked Sendable {
    enum Invalidator: Int { case none = 0, loopThread = 1, otherThread = 2 }
    let ctx: ScenarioContext
    let label: String
    let intervalNs: UInt64
    let loopTid: Int32
    let repeats: Bool
    let fires = Atomic<Int>(0)
    let addedAt = Atomic<UInt64>(0)  // CLOCK_MONOTONIC before the add call; 0 until added
    let invalidated = Atomic<Int>(0)  // Invalidator, set right after invalidate() returned
    let lateFires = Atomic<Int>(0)
    let maxLateNs = Atomic<UInt64>(0)
    /// For repeating timers: invalidate after this many firings (how is up to the round).
    let stopAfter: Int
    /// Runs on the loop thread in the handler after the checks (self-invalidation, sibling invalidation).
    var onFire: (@Sendable (SpindleTimer, Int) -> Void)?

    init(ctx: ScenarioContext, label: String, intervalNs: UInt64, loopTid: Int32, repeats: Bool, stopAfter: Int) {
        self.ctx = ctx
        self.label = label
        self.intervalNs = intervalNs
        self.loopTid = loopTid
        self.repeats = repeats
        self.stopAfter = stopAfter
    }

    func makeTimer() -> SpindleTimer {
        let interval = self.intervalNs == 100_000 && !self.repeats ? 0 : Double(self.intervalNs) / 1e9
        return try! SpindleTimer(interval: interval, repeats: self.repeats) { [self] timer in self.fired(timer) }
    }

    func invalidate(_ timer: SpindleTimer, from who: Invalidator) {
        timer.invalidate()
        self.invalidated.store(who.rawValue, ordering: .releasing)
    }

    private func fired(_ timer: SpindleTimer) {
        let now = nowNs()
        let n = self.fires.add(1, ordering: .acquiringAndReleasing).newValue
        if SpindleThread.current.threadID != self.loopTid { ctx.violation("wrong-thread", "\(label) fired off its loop thread") }
        let added = self.addedAt.load(ordering: .acquiring)
        let due = added &+ UInt64(n) &* self.intervalNs
        if added == 0 || now < due {
            ctx.violation("fired-early", "\(label) firing #\(n) came \(added == 0 ? "before add returned" : "\(due - now) ns before its fire date")")
        } else if !self.repeats {
            if now - due > TimersScenario.lateBoundNs {
                ctx.violation("one-shot-late", "\(label) fired \((now - due) / 1_000_000) ms after its fire date")
            }
            var seen = self.maxLateNs.load(ordering: .relaxed)
            while now - due > seen {
                let (ok, actual) = self.maxLateNs.compareExchange(expected: seen, desired: now - due, ordering: .relaxed)
                if ok { break }
                seen = actual
            }
        }
        if !self.repeats && n > 1 { ctx.violation("one-shot-not-once", "\(label) fired \(n) times") }
        switch Invalidator(rawValue: self.invalidated.load(ordering: .acquiring)) ?? .none {
        case .none: break
        case .loopThread:
            ctx.violation("fired-after-invalidate", "\(label) fired (#\(n)) after invalidate() returned on the loop thread")
        case .otherThread:
            let late = self.lateFires.add(1, ordering: .relaxed).newValue
            if late > 1 {
                ctx.violation("fired-after-invalidate", "\(label) fired \(late) times after invalidate() returned on another thread")
            }
        }
        ctx.count()
        self.onFire?(timer, n)
    }
}

enum TimersScenario {
    static let invariants = ["one-shot-not-once", "one-shot-missed", "fired-early", "one-shot-late",
                             "fired-after-invalidate", "repeating-stalled", "wrong-thread", "thread-stuck"]

    /// How late a one-shot timer may fire past its fire date (500 ms). Normal lateness is the loop's wake-up
    /// latency plus the handlers of other timers due in the same pass; on a loaded 2-core CI machine under
    /// ThreadSanitizer, a loop thread or adding thread kept off the CPU (the fire date counts from just before
    /// `add`) adds scheduler delays of milliseconds to tens of milliseconds. 500 ms leaves a wide margin over
    /// that, yet is half of a firing a second late: a timer that fires well after its date is caught, and a
    /// slow machine does not flake.
    static let lateBoundNs: UInt64 = 500_000_000

    static func run(_ ctx: ScenarioContext) {
        var rng = SplitMix64.derive(ctx.seed, 23)
        guard let a = LoopThread(ctx, name: "stress-timers-0") else { return }
        guard let b = LoopThread(ctx, name: "stress-timers-1") else { a.stop(ctx); return }
        let loops = [a, b]
        var rounds = 0
        var oneShots = 0
        var repeating = 0
        var maxLate: UInt64 = 0
        var crossLate = 0
        while ctx.running {
            rounds += 1
            let r = round(ctx, loops, &rng)
            oneShots += r.oneShots
            repeating += r.repeating
            maxLate = max(maxLate, r.maxLate)
            crossLate += r.crossLate
        }
        for l in loops { l.stop(ctx) }
        ctx.figure("rounds", "\(rounds)")
        ctx.figure("timers", "\(oneShots) one-shot, \(repeating) repeating")
        ctx.figure("max-one-shot-lateness", "\(fmt(Double(maxLate) / 1e6, 2)) ms")
        ctx.figure("late-after-cross-thread-invalidate", "\(crossLate)")
    }

    /// Schedules `timer` on `lt`, from the loop thread (in a perform) or from this thread, recording the time
    /// before the add. Returns once it is added.
    static func add(_ probe: TimerProbe, _ timer: SpindleTimer, on lt: LoopThread, fromLoop: Bool) {
        if fromLoop {
            let added = try! SpindleSemaphore(value: 0)
            lt.loop.perform {
                probe.addedAt.store(nowNs(), ordering: .releasing)
                try! lt.loop.add(timer)
                added.signal()
            }
            if !added.wait(timeout: .seconds(10)) { probe.ctx.violation("thread-stuck", "a perform did not run in 10 s") }
        } else {
            probe.addedAt.store(nowNs(), ordering: .releasing)
            try! lt.loop.add(timer)
        }
    }

    static func round(_ ctx: ScenarioContext, _ loops: [LoopThread], _ rng: inout SplitMix64)
        -> (oneShots: Int, repeating: Int, maxLate: UInt64, crossLate: Int) {
        var probes: [(TimerProbe, SpindleTimer)] = []
        var cancelledEarly: [(TimerProbe, Bool)] = []  // (probe, invalidate returned before its fire date)
        // One-shot timers.
        let nOne = rng.int(10...40)
        for i in 0..<nOne {
            let lt = loops[rng.int(0..<loops.count)]
            let intervalNs: UInt64 = rng.chance(0.15) ? 100_000 : UInt64(rng.int(50...20_000)) * 1000
            let probe = TimerProbe(ctx: ctx, label: "one-shot \(i) (\(intervalNs / 1000) µs)", intervalNs: intervalNs,
                                   loopTid: lt.tid, repeats: false, stopAfter: 1)
            let timer = probe.makeTimer()
            add(probe, timer, on: lt, fromLoop: rng.chance(0.3))
            probes.append((probe, timer))
        }
        for i in 0..<rng.int(0...5) {
            let lt = loops[rng.int(0..<loops.count)]
            let intervalNs = UInt64(rng.int(50...200)) * 1_000_000
            let probe = TimerProbe(ctx: ctx, label: "cancelled one-shot \(i)", intervalNs: intervalNs, loopTid: lt.tid,
                                   repeats: false, stopAfter: 1)
            let timer = probe.makeTimer()
            add(probe, timer, on: lt, fromLoop: false)
            probe.invalidate(timer, from: .otherThread)
            cancelledEarly.append((probe, nowNs() < probe.addedAt.load(ordering: .acquiring) + intervalNs))
        }
        // Repeating timers: ways 0 own handler, 1 perform on the loop, 2 another thread, 3 sibling's handler.
        var repeatingProbes: [(TimerProbe, SpindleTimer, Int)] = []
        for i in 0..<rng.int(3...10) {
            let lt = loops[rng.int(0..<loops.count)]
            let intervalNs = UInt64(rng.int(200...5000)) * 1000
            let way = rng.int(0..<4)
            let k = rng.int(1...8)
            let probe = TimerProbe(ctx: ctx, label: "repeating \(i) (\(intervalNs / 1000) µs, way \(way))",
                                   intervalNs: intervalNs, loopTid: lt.tid, repeats: true, stopAfter: k)
            let timer = probe.makeTimer()
            if way == 0 || way == 3 {
                probe.onFire = { [unowned probe] t, n in if n == probe.stopAfter { probe.invalidate(t, from: .loopThread) } }
            }
            if way == 3 {
                // The sibling: same interval, added right after; the first timer's k-th firing invalidates it.
                let sib = TimerProbe(ctx: ctx, label: "sibling of repeating \(i)", intervalNs: intervalNs, loopTid: lt.tid,
                                     repeats: true, stopAfter: Int.max)
                let sibTimer = sib.makeTimer()
                probe.onFire = { [unowned probe] t, n in
                    if n == probe.stopAfter {
                        sib.invalidate(sibTimer, from: .loopThread)
                        probe.invalidate(t, from: .loopThread)
                    }
                }
                let added = try! SpindleSemaphore(value: 0)
                lt.loop.perform {
                    probe.addedAt.store(nowNs(), ordering: .releasing)
                    try! lt.loop.add(timer)
                    sib.addedAt.store(nowNs(), ordering: .releasing)
                    try! lt.loop.add(sibTimer)
                    added.signal()
                }
                if !added.wait(timeout: .seconds(10)) { ctx.violation("thread-stuck", "a perform did not run in 10 s") }
                repeatingProbes.append((sib, sibTimer, 3))
            } else {
                add(probe, timer, on: lt, fromLoop: rng.chance(0.3))
            }
            repeatingProbes.append((probe, timer, way))
        }
        // Drive the cross-thread and perform invalidations; wait for everything to settle.
        let deadline = SpindleDeadline.after(.seconds(10))
        var open = repeatingProbes.filter { $0.2 == 1 || $0.2 == 2 }
        while !open.isEmpty && !deadline.hasPassed {
            open.removeAll { probe, timer, way in
                guard probe.fires.load(ordering: .acquiring) >= probe.stopAfter else { return false }
                if way == 2 {
                    probe.invalidate(timer, from: .otherThread)
                } else {
                    let lt = loops.first { $0.tid == probe.loopTid }!
                    lt.loop.perform { probe.invalidate(timer, from: .loopThread) }
                }
                return true
            }
            if !open.isEmpty { sleepMicros(100) }
        }
        var maxInterval: UInt64 = 0
        for (p, _) in probes { maxInterval = max(maxInterval, p.intervalNs) }
        for (p, _, _) in repeatingProbes { maxInterval = max(maxInterval, p.intervalNs) }
        while !deadline.hasPassed {
            let oneShotsDone = probes.allSatisfy { $0.0.fires.load(ordering: .acquiring) >= 1 }
            let repeatingDone = repeatingProbes.allSatisfy { $0.0.invalidated.load(ordering: .acquiring) != 0 }
            if oneShotsDone && repeatingDone { break }
            sleepMicros(200)
        }
        // Linger two of the longest intervals (plus a margin) so late firings would show, then fence both loops.
        sleepMicros(Int(2 * maxInterval / 1000) + 2000)
        for lt in loops {
            let fence = try! SpindleSemaphore(value: 0)
            lt.loop.perform { fence.signal() }
            if !fence.wait(timeout: .seconds(10)) { ctx.violation("thread-stuck", "a loop did not run a perform in 10 s") }
        }
        var maxLate: UInt64 = 0
        for (p, t) in probes {
            let n = p.fires.load(ordering: .acquiring)
            if n == 0 { ctx.violation("one-shot-missed", "\(p.label) never fired (valid: \(t.isValid))") }
            maxLate = max(maxLate, p.maxLateNs.load(ordering: .relaxed))
        }
        for (p, strict) in cancelledEarly where strict && p.fires.load(ordering: .acquiring) > 0 {
            ctx.violation("fired-after-invalidate", "\(p.label) was invalidated before its fire date and still fired")
        }
        var crossLate = 0
        for (p, t, _) in repeatingProbes {
            if p.invalidated.load(ordering: .acquiring) == 0 {
                ctx.violation("repeating-stalled", "\(p.label): \(p.fires.load(ordering: .acquiring)) of "
                    + "\(p.stopAfter) firings in 10 s")
                t.invalidate()
            }
            crossLate += p.lateFires.load(ordering: .relaxed)
        }
        return (probes.count + cancelledEarly.count, repeatingProbes.count, maxLate, crossLate)
    }
}
