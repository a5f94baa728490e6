import Spindle
import Synchronization

// `barrier`: two queues (widths ncpu and 4), each fed by its own thread with segments of random operations
// separated by barriers. Invariants: when a barrier runs, every operation added before it has finished and
// nothing else runs; operations added after it start only after it returned; every barrier runs once.
//
// `suspend`: suspend/resume and limit changes (including 0) while a producer keeps adding. Race-free check: at
// the instant T the queue is suspended (or set to width 0) at most W operations hold a slot, W being the
// largest limit set since the queue was last seen fully drained. Each started operation was either counted in
// `started` by T or held an unstarted slot, so with `ended` read after T:
//   started(end of window) - ended(after T) <= W.
// Any excess is an operation started while suspended. After resuming, pending work must start within 2 s.

final class Segment: @unchecked Sendable {
    let size: Int
    let done = Atomic<Int>(0)
    let barrierRan = Atomic<Int>(0)
    init(size: Int) { self.size = size }
}

enum BarrierScenario {
    static let invariants = ["barrier-before-prior-finished", "barrier-not-alone", "started-before-barrier",
                             "barrier-not-once", "op-not-completed", "drain-timeout"]

    static func run(_ ctx: ScenarioContext) {
        let queues = [ctx.makeQueue("barrier-ncpu", width: ctx.config.ncpu), ctx.makeQueue("barrier-w4", width: 4)]
        let barriers = Atomic<Int>(0)
        let rootSeed = SplitMix64.derive(ctx.seed, 4).seedValue
        runThreads(ctx, queues.count, name: "barrier-add", timeout: .seconds(ctx.config.duration + 60)) { t in
            var rng = SplitMix64.derive(rootSeed, UInt64(t))
            let q = queues[t]
            let active = HighWater()
            while ctx.running {
                let count = rng.int(2...12)
                var segments: [Segment] = []
                for s in 0..<count {
                    let seg = Segment(size: rng.int(0...20))
                    let previous = segments.last
                    segments.append(seg)
                    for _ in 0..<seg.size {
                        let work = UInt64(rng.chance(0.2) ? rng.int(1000...20000) : 0)
                        let op = StressBlockOp {
                            if let previous, previous.barrierRan.load(ordering: .acquiring) == 0 {
                                ctx.violation("started-before-barrier", "segment \(s) op started before barrier \(s - 1)")
                            }
                            _ = active.enter()
                            spin(ns: work)
                            active.leave()
                        }
                        op.completionBlock = {
                            seg.done.add(1, ordering: .releasing)
                            ctx.count()
                        }
                        if rng.chance(0.3) { op.queuePriority = rng.chance(0.5) ? .veryHigh : .veryLow }
                        try! q.addOperation(op)
                    }
                    q.addBarrierBlock {
                        let done = seg.done.load(ordering: .acquiring)
                        if done != seg.size {
                            ctx.violation("barrier-before-prior-finished",
                                          "barrier \(s) ran with \(done)/\(seg.size) prior ops finished")
                        }
                        let running = active.current.load(ordering: .acquiring)
                        if running != 0 { ctx.violation("barrier-not-alone", "barrier \(s) ran beside \(running) ops") }
                        let n = seg.barrierRan.add(1, ordering: .releasing).newValue
                        if n != 1 { ctx.violation("barrier-not-once", "barrier \(s) ran \(n) times") }
                        barriers.add(1, ordering: .relaxed)
                        ctx.count()
                    }
                    if rng.chance(0.1) { sleepMicros(rng.int(10...500)) }
                }
                guard ctx.drain([q]) else { return }
                for (s, seg) in segments.enumerated() {
                    if seg.barrierRan.load(ordering: .acquiring) != 1 {
                        ctx.violation("barrier-not-once", "barrier \(s) ran \(seg.barrierRan.load(ordering: .relaxed)) times")
                    }
                    if seg.done.load(ordering: .acquiring) != seg.size {
                        ctx.violation("op-not-completed", "segment \(s): \(seg.done.load(ordering: .relaxed))/\(seg.size)")
                    }
                }
            }
        }
        ctx.drain(queues)
        ctx.figure("barriers", "\(barriers.load(ordering: .relaxed))")
    }
}

extension SplitMix64 {
    /// A seed for further derivations (one draw).
    var seedValue: UInt64 { var copy = self; return copy.next() }
}

final class SuspendCounters: @unchecked Sendable {
    let started = Atomic<Int>(0)
    let ended = Atomic<Int>(0)
    let added = Atomic<Int>(0)
    let pause = Atomic<Bool>(false)
    let paused = Atomic<Bool>(false)
    let stop = Atomic<Bool>(false)
}

enum SuspendScenario {
    static let invariants = ["started-while-suspended", "started-at-width-0", "no-start-after-resume",
                             "drain-timeout"]

    static func run(_ ctx: ScenarioContext) {
        let q = ctx.makeQueue("suspend-q", width: 2)
        var rng = SplitMix64.derive(ctx.seed, 5)
        let c = SuspendCounters()
        let producerSeed = rng.next()
        // The producer: adds short operations until told to stop; parks when asked to pause.
        let producerDone = try! SpindleSemaphore(value: 0)
        let producer = try! spawnRetryingOrThrow(name: "suspend-add") {
            var local = SplitMix64(seed: producerSeed)
            while !c.stop.load(ordering: .acquiring) {
                if c.pause.load(ordering: .acquiring) {
                    c.paused.store(true, ordering: .releasing)
                    sleepMicros(100)
                    continue
                }
                c.paused.store(false, ordering: .releasing)
                let backlog = c.added.load(ordering: .relaxed) - c.started.load(ordering: .relaxed)
                if backlog > 200 { sleepMicros(200); continue }
                let work = UInt64(local.chance(0.2) ? local.int(10_000...200_000) : local.int(0...5000))
                let op = StressBlockOp {
                    c.started.add(1, ordering: .sequentiallyConsistent)
                    spin(ns: work)
                    c.ended.add(1, ordering: .sequentiallyConsistent)
                }
                op.completionBlock = { ctx.count() }
                c.added.add(1, ordering: .relaxed)
                try! q.addOperation(op)
            }
            producerDone.signal()
        }
        var limit = 2
        var lmax = 2  // the largest limit set since the queue was last seen drained
        var windows = 0
        var cycles = 0
        var worstSlack = Int.max
        while ctx.running {
            cycles += 1
            // Run a while, maybe changing the limit (lowering lets running ones finish: lmax keeps the bound).
            for _ in 0..<rng.int(0...3) {
                limit = rng.int(1...4)
                try! q.setMaxConcurrentOperationCount(limit)
                lmax = max(lmax, limit)
                sleepMicros(rng.int(500...5000))
            }
            sleepMicros(rng.int(1000...10_000))
            // The window: suspended, or width 0.
            let useSuspend = rng.chance(0.6)
            if useSuspend { q.isSuspended = true } else { try! q.setMaxConcurrentOperationCount(0) }
            let endedAfterT = c.ended.load(ordering: .sequentiallyConsistent)
            let windowUs = rng.int(2000...20_000)
            if useSuspend && rng.chance(0.5) {
                // Raising the limit while suspended must start nothing either.
                sleepMicros(windowUs / 2)
                limit = rng.int(1...4)
                try! q.setMaxConcurrentOperationCount(limit)
                lmax = max(lmax, limit)
                sleepMicros(windowUs / 2)
            } else {
                sleepMicros(windowUs)
            }
            let startedAtEnd = c.started.load(ordering: .sequentiallyConsistent)
            let excess = startedAtEnd - endedAfterT - lmax
            worstSlack = min(worstSlack, -excess)
            if excess > 0 {
                ctx.violation(useSuspend ? "started-while-suspended" : "started-at-width-0",
                              "\(excess) op(s) started in a \(windowUs) µs window (bound \(lmax) slots)", count: excess)
            }
            windows += 1
            if useSuspend { q.isSuspended = false } else { try! q.setMaxConcurrentOperationCount(limit) }
            // Pending work must start again promptly (a lost wakeup on resume would stall here).
            if c.added.load(ordering: .relaxed) > startedAtEnd {
                let deadline = SpindleDeadline.after(.seconds(2))
                while c.started.load(ordering: .acquiring) == startedAtEnd && !deadline.hasPassed { sleepMicros(100) }
                if c.started.load(ordering: .acquiring) == startedAtEnd {
                    ctx.violation("no-start-after-resume", "nothing started within 2 s of resuming; "
                        + q.debugDescription.split(separator: "\n").first.map(String.init)!)
                }
            }
            // Now and then: let it drain fully, which resets the slot bound to the current limit.
            if cycles % 8 == 0 {
                c.pause.store(true, ordering: .releasing)
                let pd = SpindleDeadline.after(.seconds(5))
                while !c.paused.load(ordering: .acquiring) && !pd.hasPassed { sleepMicros(100) }
                if ctx.drain([q]) { lmax = limit }
                c.pause.store(false, ordering: .releasing)
            }
        }
        c.stop.store(true, ordering: .releasing)
        if producerDone.wait(timeout: .seconds(10)) { try? producer.join() } else {
            ctx.violation("drain-timeout", "producer did not stop")
        }
        try! q.setMaxConcurrentOperationCount(4)
        q.isSuspended = false
        ctx.drain([q])
        ctx.figure("windows", "\(windows)")
        ctx.figure("min-slack", worstSlack == Int.max ? "-" : "\(worstSlack)")
    }
}
