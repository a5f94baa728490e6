import Glibc
import Spindle
import Synchronization

// `cancel`: operations cancelled at random moments (before being added, while queued, while running, after
// finishing) from several threads, plus cancelAllOperations, on queues of widths 1, 2 and ncpu.
//
// Invariants: every operation finishes exactly once (observers see exactly one `did isFinished`, and it is the
// last change delivered); the completion block, where there is one (about 70 % of them), runs exactly once; main
// never runs for an operation cancelled before it was added, nor before its dependencies finished; the dependents
// of a cancelled operation become ready (the queues drain), with or without a completion block; a thread waiting
// for an operation (`waitUntilFinished`, bounded) is released once it finishes, cancelled or not; isExecuting &&
// isFinished is never observed (sampled finished-first, so the check is race-free: finished is terminal);
// isCancelled never changes after finishing.

final class CancelOp: SpindleOperation, @unchecked Sendable {
    let live = LiveToken()
    let ctx: ScenarioContext
    let index: Int
    let preCancelled: Bool
    let runs = Atomic<Int>(0)
    let completions = Atomic<Int>(0)
    let finishEvents = Atomic<Int>(0)
    let eventsAfterFinish = Atomic<Int>(0)
    let lateEvent = SpindleLockedValue<String?>(nil)  // the first change delivered after did isFinished
    let cancelledAtCompletion = Atomic<Int>(-1)  // -1 unknown, 0 no, 1 yes
    let work: UInt64
    var observed = false  // set before the operation is added; an observer then counts finish events
    var hasCompletion = false  // set before the operation is added
    var prerequisites: [CancelOp] = []  // set before the operation is added; read by main

    init(ctx: ScenarioContext, index: Int, preCancelled: Bool, work: UInt64) {
        self.ctx = ctx
        self.index = index
        self.preCancelled = preCancelled
        self.work = work
        super.init()
    }

    override func main() throws {
        self.runs.add(1, ordering: .relaxed)
        if self.preCancelled { ctx.violation("main-after-precancel", "op \(self.index) main ran although cancelled before add") }
        if !self.isExecuting || self.isFinished {
            ctx.violation("state-in-main", "op \(self.index): executing \(isExecuting) finished \(isFinished)")
        }
        for dependency in self.prerequisites where !dependency.isFinished {
            ctx.violation("start-before-dependency", "op \(self.index) main ran before op \(dependency.index) finished")
        }
        // Cooperative work: stop early when cancelled.
        let end = nowNs() &+ self.work
        while nowNs() < end && !self.isCancelled {}
    }

    func installCompletion() {
        self.hasCompletion = true
        self.completionBlock = { [unowned self] in
            let n = self.completions.add(1, ordering: .relaxed).newValue
            if n != 1 { self.ctx.violation("completion-not-once", "op \(self.index) completion ran \(n) times") }
            if !self.isFinished { self.ctx.violation("completion-before-finished", "op \(self.index)") }
            self.cancelledAtCompletion.store(self.isCancelled ? 1 : 0, ordering: .releasing)
            self.ctx.count()
        }
    }

    func installObserver() {
        self.observed = true
        self.observe([.isExecuting, .isFinished, .isCancelled]) { [unowned self] _, change in
            if self.finishEvents.load(ordering: .acquiring) > 0 {
                self.eventsAfterFinish.add(1, ordering: .relaxed)
                self.lateEvent.withLockedValue { if $0 == nil { $0 = "\(change)" } }
            }
            if change.phase == .did && change.key == .isFinished { self.finishEvents.add(1, ordering: .releasing) }
        }
    }
}

enum CancelScenario {
    static let invariants = ["main-after-precancel", "finish-not-once", "completion-not-once",
                             "completion-before-finished", "executing-and-finished", "events-after-finish",
                             "state-in-main", "cancel-flag-changed", "not-finished", "add-failed", "drain-timeout",
                             "start-before-dependency", "waiter-not-released"]

    static func run(_ ctx: ScenarioContext) {
        let queues = [ctx.makeQueue("cancel-serial", width: 1), ctx.makeQueue("cancel-w2", width: 2),
                      ctx.makeQueue("cancel-ncpu", width: ctx.config.ncpu)]
        var rng = SplitMix64.derive(ctx.seed, 1)
        var rounds = 0
        var preCancelledTotal = 0
        var cancelAlls = 0
        let bodiesRun = Atomic<Int>(0)
        let waitsReturned = Atomic<Int>(0)
        let waitsOnCancelled = Atomic<Int>(0)
        let threads = max(2, ctx.config.threads)
        while ctx.running {
            rounds += 1
            let size = min(ctx.opsLeft, rng.int(200...1000))
            if size == 0 { break }
            var ops: [CancelOp] = []
            for i in 0..<size {
                let pre = rng.chance(0.2)
                let op = CancelOp(ctx: ctx, index: i, preCancelled: pre,
                                  work: rng.chance(0.3) ? UInt64(rng.int(1000...50000)) : 0)
                if rng.chance(0.7) { op.installCompletion() }  // without one, a cancelled op takes another path
                if rng.chance(0.25) { op.installObserver() }
                if pre {
                    op.cancel()
                    preCancelledTotal += 1
                }
                ops.append(op)
            }
            // A few dependency edges so cancellation also races readiness (cancelled ops become ready at once).
            for i in 1..<max(1, size) where rng.chance(0.1) {
                let dependency = ops[rng.int(0..<i)]
                if (try? ops[i].addDependency(dependency)) != nil { ops[i].prerequisites.append(dependency) }
            }
            let queueOf = (0..<size).map { _ in rng.int(0..<queues.count) }
            let frozen = ops
            let roundSeed = rng.next()
            let addersDone = Atomic<Int>(0)
            let adders = max(1, threads / 2)
            let cancelAllRound = rng.chance(0.3)
            if cancelAllRound { cancelAlls += 1 }
            // Threads 0..<adders add; the next one samples states; the rest but the last cancel at random instants;
            // the last one waits for a few operations, cancelled ones among them (bounded, well under the watchdog).
            let waiter = adders + max(2, threads - adders)
            runThreads(ctx, waiter + 1, name: "cancel") { t in
                var local = SplitMix64.derive(roundSeed, UInt64(t))
                if t < adders {
                    var i = t
                    while i < frozen.count {
                        do { try queues[queueOf[i]].addOperation(frozen[i]) } catch {
                            ctx.violation("add-failed", "op \(i): \(error)")
                        }
                        if local.chance(0.01) { sleepMicros(local.int(10...200)) }
                        i += adders
                    }
                    addersDone.add(1, ordering: .releasing)
                    return
                }
                if t == waiter {
                    for _ in 0..<8 {
                        let op = frozen[local.int(0..<frozen.count)]
                        if local.chance(0.5) { op.cancel() }
                        let finished = (try? op.waitUntilFinished(timeout: .seconds(10))) ?? false
                        if !finished {
                            ctx.violation("waiter-not-released", "op \(op.index) (cancelled \(op.isCancelled), finished "
                                + "\(op.isFinished)): waitUntilFinished did not return in 10 s")
                        }
                        waitsReturned.add(1, ordering: .relaxed)
                        if op.isCancelled { waitsOnCancelled.add(1, ordering: .relaxed) }
                    }
                    return
                }
                let sampler = t == adders
                var spins = 0
                while true {
                    let done = addersDone.load(ordering: .acquiring) == adders
                    let op = frozen[local.int(0..<frozen.count)]
                    if sampler {
                        // Finished first: once finished it can never be executing again.
                        let f = op.isFinished
                        let e = op.isExecuting
                        if f && e { ctx.violation("executing-and-finished", "op \(op.index): \(op)") }
                    } else if local.chance(0.3) {
                        op.cancel()
                    }
                    if cancelAllRound && local.chance(0.0005) {
                        queues[local.int(0..<queues.count)].cancelAllOperations()
                    }
                    if local.chance(0.05) { sleepMicros(local.int(1...50)) }
                    spins += 1
                    if done && spins > 2 * frozen.count { break }
                    if spins > 200 * frozen.count { break }
                }
            }
            guard ctx.drain(queues, timeout: .seconds(30)) else { break }
            for op in frozen {
                if !op.isFinished { ctx.violation("not-finished", "op \(op.index): \(op)") }
                let c = op.completions.load(ordering: .relaxed)
                if op.hasCompletion && c != 1 {
                    ctx.violation("completion-not-once", "op \(op.index) completion ran \(c) times")
                } else if !op.hasCompletion {
                    ctx.count()  // the others counted themselves in their completion block
                }
                let r = op.runs.load(ordering: .relaxed)
                if r > 1 { ctx.violation("finish-not-once", "op \(op.index) main ran \(r) times") }
                bodiesRun.add(r, ordering: .relaxed)
                let seen = op.cancelledAtCompletion.load(ordering: .acquiring)
                op.cancel()  // post-finish cancel: must change nothing
                if seen >= 0 && (seen == 1) != op.isCancelled {
                    ctx.violation("cancel-flag-changed", "op \(op.index): isCancelled \(op.isCancelled) at end, "
                        + "\(seen == 1) at completion")
                }
                if op.observed {
                    let fe = op.finishEvents.load(ordering: .acquiring)
                    if fe != 1 { ctx.violation("finish-not-once", "op \(op.index): \(fe) did-isFinished events") }
                    let after = op.eventsAfterFinish.load(ordering: .relaxed)
                    if after != 0 {
                        ctx.violation("events-after-finish", "op \(op.index): \(after) change(s) delivered after "
                            + "'did isFinished', first '\(op.lateEvent.withLockedValue { $0 ?? "?" })'")
                    }
                }
            }
        }
        ctx.drain(queues)
        ctx.figure("rounds", "\(rounds)")
        ctx.figure("pre-cancelled", "\(preCancelledTotal)")
        ctx.figure("bodies-run", "\(bodiesRun.load(ordering: .relaxed))")
        ctx.figure("cancelAll-rounds", "\(cancelAlls)")
        ctx.figure("waits", "\(waitsReturned.load(ordering: .relaxed)) (on cancelled: "
            + "\(waitsOnCancelled.load(ordering: .relaxed)))")
    }
}

