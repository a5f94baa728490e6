import Spindle
import Synchronization

// `width`: queues of width 1, 2, 3 and 8. Operations block on a gate semaphore, so the number running at once
// climbs to the width and stays there: the high-water mark must never exceed the width and must reach
// min(width, ops) (no accidental serialisation). Before some gated rounds the queue is widened by two, fills the
// wider width, and is narrowed back (`widen`): it then has more threads than its width, so a slot check that lets
// one too many run shows (with only `width` threads, it could not). Between gated rounds, bursts of tiny
// operations added from several threads check the bound under churn.
//
// `priority`: a suspended serial queue gets 5 levels × N operations in shuffled order (single adder, some in
// batches; ~10% re-prioritised while waiting), then resumes: 0 inversions (a lower level running before a higher
// one) and FIFO within a level for operations never re-prioritised.

enum WidthScenario {
    static let invariants = ["width-exceeded", "width-not-reached", "gate-timeout", "drain-timeout"]

    /// Raises `q`'s width to `width + extra`, fills it with blocking operations (so that many threads exist), lets
    /// them go and narrows it back to `width`. Returns false if the queue did not drain (a violation already).
    static func widen(_ ctx: ScenarioContext, _ q: SpindleOperationQueue, width w: Int, by extra: Int) -> Bool {
        q.maxConcurrentOperationCount = w + extra
        let gate = try! SpindleSemaphore(value: 0)
        let hw = HighWater()
        for _ in 0..<(w + extra) {
            try! q.addOperation(StressBlockOp {
                let now = hw.enter()
                if now > w + extra { ctx.violation("width-exceeded", "widened to \(w + extra): \(now) running at once") }
                if !gate.wait(timeout: .seconds(10)) { ctx.violation("gate-timeout", "widened: waited 10 s for the gate") }
                hw.leave()
                ctx.count()
            })
        }
        let deadline = SpindleDeadline.after(.seconds(5))
        while hw.current.load(ordering: .acquiring) < w + extra && !deadline.hasPassed { sleepMicros(50) }
        if hw.current.load(ordering: .acquiring) < w + extra {
            ctx.violation("width-not-reached", "widened to \(w + extra): only \(hw.current.load(ordering: .acquiring)) "
                + "ran at once after 5 s")
        }
        for _ in 0..<(w + extra) { gate.signal() }
        let drained = ctx.drain([q])
        q.maxConcurrentOperationCount = w
        return drained
    }

    static func run(_ ctx: ScenarioContext) {
        let widths = [1, 2, 3, 8]
        let queues = widths.map { ctx.makeQueue("width-\($0)", width: $0) }
        var rng = SplitMix64.derive(ctx.seed, 2)
        var peaks = [Int](repeating: 0, count: widths.count)
        var rounds = 0
        var widened = 0
        while ctx.running {
            rounds += 1
            for (k, w) in widths.enumerated() where ctx.running {
                let q = queues[k]
                if rng.chance(0.25) {
                    guard widen(ctx, q, width: w, by: 2) else { return }
                    widened += 1
                }
                // Gated round: everyone blocks until the driver has seen the width reached.
                let n = rng.int(1...(3 * w + 2))
                let gate = try! SpindleSemaphore(value: 0)
                let hw = HighWater()
                var ops: [SpindleOperation] = []
                for _ in 0..<n {
                    let op = StressBlockOp {
                        let now = hw.enter()
                        if now > w { ctx.violation("width-exceeded", "width \(w): \(now) running at once") }
                        if !gate.wait(timeout: .seconds(10)) {
                            ctx.violation("gate-timeout", "width \(w): an op waited 10 s for the gate")
                        }
                        hw.leave()
                        ctx.count()
                    }
                    if rng.chance(0.3) { op.queuePriority = rng.chance(0.5) ? .high : .low }
                    ops.append(op)
                }
                if rng.chance(0.5) {
                    try! q.addOperations(ops)
                } else {
                    for op in ops { try! q.addOperation(op) }
                }
                let target = min(w, n)
                let deadline = SpindleDeadline.after(.seconds(5))
                while hw.current.load(ordering: .acquiring) < target && !deadline.hasPassed { sleepMicros(50) }
                let reached = hw.current.load(ordering: .acquiring)
                if reached < target {
                    ctx.violation("width-not-reached", "width \(w), \(n) blocking ops: only \(reached) ran at once "
                        + "after 5 s (expected \(target))")
                }
                for _ in 0..<n { gate.signal() }
                guard ctx.drain([q]) else { return }
                peaks[k] = max(peaks[k], hw.peak.load(ordering: .relaxed))
                if hw.peak.load(ordering: .relaxed) > w {
                    ctx.violation("width-exceeded", "width \(w): peak \(hw.peak.load(ordering: .relaxed))")
                }
            }
            // Burst: tiny ops from two threads onto all queues at once.
            guard ctx.running else { break }
            let burst = HighWater()
            let perWidth = widths.map { _ in HighWater() }
            let count = min(200, ctx.opsLeft / 8 + 1)
            let burstSeed = rng.next()
            runThreads(ctx, 2, name: "width-add") { t in
                var local = SplitMix64.derive(burstSeed, UInt64(t))
                for _ in 0..<count {
                    let k = local.int(0..<widths.count)
                    let w = widths[k]
                    let spinNs = UInt64(local.int(0...3000))
                    try! queues[k].addOperation(StressBlockOp {
                        let now = perWidth[k].enter()
                        _ = burst.enter()
                        if now > w { ctx.violation("width-exceeded", "burst, width \(w): \(now) running at once") }
                        spin(ns: spinNs)
                        burst.leave()
                        perWidth[k].leave()
                        ctx.count()
                    })
                }
            }
            guard ctx.drain(queues) else { return }
            for (k, w) in widths.enumerated() {
                peaks[k] = max(peaks[k], perWidth[k].peak.load(ordering: .relaxed))
                _ = w
            }
        }
        ctx.drain(queues)
        ctx.figure("rounds", "\(rounds)")
        ctx.figure("peak", zip(widths, peaks).map { "w\($0.0)=\($0.1)" }.joined(separator: ","))
        ctx.figure("widened", "\(widened)")
    }
}

final class PriorityLog: @unchecked Sendable {
    let entries = SpindleLockedValue<[Int]>([])  // operation ids in the order main ran (a pthread mutex: TSan sees it)
}

enum PriorityScenario {
    static let invariants = ["priority-inversion", "fifo-reorder", "lost-op", "drain-timeout"]
    static let levels: [SpindleOperation.QueuePriority] = [.veryLow, .low, .normal, .high, .veryHigh]

    static func run(_ ctx: ScenarioContext) {
        let q = ctx.makeQueue("priority-serial", width: 1)
        var rng = SplitMix64.derive(ctx.seed, 3)
        var rounds = 0
        var reprioritised = 0
        var maxPerLevel = 0
        while ctx.running {
            rounds += 1
            q.isSuspended = true
            let perLevel = min(max(1, ctx.opsLeft / 5), rng.int(20...300))
            maxPerLevel = max(maxPerLevel, perLevel)
            let log = PriorityLog()
            log.entries.withLockedValue { $0.reserveCapacity(perLevel * 5) }
            var level: [Int] = []
            var ops: [SpindleBlockOperation] = []
            for l in 0..<5 {
                for _ in 0..<perLevel {
                    let id = ops.count
                    let op = StressBlockOp { log.entries.withLockedValue { $0.append(id) } }
                    op.completionBlock = { ctx.count() }
                    op.queuePriority = levels[l]
                    level.append(l)
                    ops.append(op)
                }
            }
            var order = Array(0..<ops.count)
            order.shuffle(using: &rng)
            var addSeq = [Int](repeating: 0, count: ops.count)
            var pos = 0
            var seq = 0
            while pos < order.count {
                if rng.chance(0.2) {
                    let end = min(order.count, pos + rng.int(2...16))
                    let batch = order[pos..<end].map { ops[$0] }
                    for i in order[pos..<end] { addSeq[i] = seq; seq += 1 }
                    try! q.addOperations(batch)
                    pos = end
                } else {
                    addSeq[order[pos]] = seq
                    seq += 1
                    try! q.addOperation(ops[order[pos]])
                    pos += 1
                }
            }
            // Re-prioritise some while they wait; they must run at their new level.
            var changed = [Bool](repeating: false, count: ops.count)
            for i in 0..<ops.count where rng.chance(0.1) {
                var nl = rng.int(0..<4)
                if nl >= level[i] { nl += 1 }
                level[i] = nl
                ops[i].queuePriority = levels[nl]
                changed[i] = true
                reprioritised += 1
            }
            q.isSuspended = false
            guard ctx.drain([q]) else { return }
            let ran = log.entries.withLockedValue { $0 }
            if ran.count != ops.count {
                ctx.violation("lost-op", "\(ops.count) added, \(ran.count) ran", count: abs(ops.count - ran.count))
            }
            var inversions = 0
            var reorders = 0
            var lastSeq = [Int](repeating: -1, count: 5)
            for (k, id) in ran.enumerated() {
                if k > 0 && level[id] > level[ran[k - 1]] { inversions += 1 }
                if !changed[id] {
                    if addSeq[id] < lastSeq[level[id]] { reorders += 1 }
                    lastSeq[level[id]] = max(lastSeq[level[id]], addSeq[id])
                }
            }
            if inversions > 0 {
                ctx.violation("priority-inversion", "round \(rounds): \(inversions) inversions among \(ran.count) ops",
                              count: inversions)
            }
            if reorders > 0 {
                ctx.violation("fifo-reorder", "round \(rounds): \(reorders) FIFO reorders within a level",
                              count: reorders)
            }
        }
        q.isSuspended = false
        ctx.drain([q])
        ctx.figure("rounds", "\(rounds)")
        ctx.figure("max-per-level", "\(maxPerLevel)")
        ctx.figure("reprioritised", "\(reprioritised)")
    }
}
