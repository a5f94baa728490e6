import Spindle
import Synchronization

// `dag`: random dependency graphs across four queues of widths {1, 2, ncpu, 8}, fan-in 0–4, ~20% cross-queue
// edges, wired and added from several threads at once (edges are added by the thread that enqueues the
// dependent, right before it enqueues it, while upstream operations may be running or finishing).
//
// Invariants: no operation starts before every dependency has finished (its completion block returned, which
// the contract orders before dependents become ready); main runs exactly once; the completion block runs exactly
// once, after isFinished; every operation is finished when its queues drain. One completion block in twenty
// spins 50-200 µs, so edges are also wired while a dependency is finished and its completion block still runs
// (the `late-edges` figure counts them): such an edge must hold its dependent back too.

/// An operation that checks its dependencies when it starts and counts its runs and completions.
final class DagOp: SpindleOperation, @unchecked Sendable {
    let live = LiveToken()
    let ctx: ScenarioContext
    let index: Int
    var deps: [DagOp] = []  // written by the adding thread before addOperation; read in main
    var wiredLate: Set<Int> = []  // deps that were finished, completion not yet returned, when the edge was added
    let runs = Atomic<Int>(0)
    let completions = Atomic<Int>(0)
    let completed = Atomic<Bool>(false)
    let work: UInt64
    let completionWork: UInt64

    init(ctx: ScenarioContext, index: Int, work: UInt64, completionWork: UInt64) {
        self.ctx = ctx
        self.index = index
        self.work = work
        self.completionWork = completionWork
        super.init()
    }

    override func main() throws {
        let n = self.runs.add(1, ordering: .relaxed).newValue
        if n != 1 { ctx.violation("main-not-once", "op \(self.index) main ran \(n) times") }
        if !self.isExecuting || self.isFinished {
            ctx.violation("state-in-main", "op \(self.index) in main: executing \(isExecuting) finished \(isFinished)")
        }
        for d in self.deps {
            let completed = d.completed.load(ordering: .acquiring)
            let finished = d.isFinished
            if completed && finished { continue }
            // An edge added while the dependency was already finished but its completion block had not returned
            // is reported apart: the contract (item 4) still says dependents wait for the completion block.
            let late = self.wiredLate.contains(d.index)
            ctx.violation(late ? "late-edge-started-early" : "start-before-dependency",
                          "op \(self.index) started before dependency \(d.index) finished: isFinished \(finished), "
                          + "completion returned \(completed)"
                          + (late ? " (edge added while it was finished, completion not yet returned)" : ""))
        }
        spin(ns: self.work)
    }

    func installCompletion() {
        self.completionBlock = { [unowned self] in
            let n = self.completions.add(1, ordering: .relaxed).newValue
            if n != 1 { self.ctx.violation("completion-not-once", "op \(self.index) completion ran \(n) times") }
            if !self.isFinished { self.ctx.violation("completion-before-finished", "op \(self.index)") }
            spin(ns: self.completionWork)
            self.completed.store(true, ordering: .releasing)
            self.ctx.count()
        }
    }
}

enum DagScenario {
    static let invariants = ["start-before-dependency", "late-edge-started-early", "main-not-once", "completion-not-once",
                             "completion-before-finished", "not-finished", "state-in-main", "add-failed",
                             "drain-timeout"]

    static func run(_ ctx: ScenarioContext) {
        let widths = [1, 2, ctx.config.ncpu, 8]
        let queues = widths.enumerated().map { ctx.makeQueue("dag-q\($0.offset)-w\($0.element)", width: $0.element) }
        var rng = SplitMix64.derive(ctx.seed, 0)
        var rounds = 0
        var edges = 0
        var crossEdges = 0
        var maxFanIn = 0
        let lateEdges = Atomic<Int>(0)  // edges wired while the dependency was finished, completion still running
        let adders = max(1, ctx.config.threads)
        while ctx.running {
            rounds += 1
            let size = min(ctx.opsLeft, rng.int(200...1500))
            if size == 0 { break }
            // Plan the graph in topological order (edges only to earlier nodes: acyclic by construction).
            var queueOf = [Int](repeating: 0, count: size)
            var byQueue = [[Int]](repeating: [], count: queues.count)
            var plan = [[Int]](repeating: [], count: size)
            var ops: [DagOp] = []
            ops.reserveCapacity(size)
            for i in 0..<size {
                let q = rng.int(0..<queues.count)
                queueOf[i] = q
                let fanIn = i == 0 ? 0 : rng.int(0...4)
                var chosen = Set<Int>()
                for _ in 0..<fanIn {
                    let cross = rng.chance(0.2)
                    var pick: Int? = nil
                    if !cross, !byQueue[q].isEmpty {
                        // Mostly recent nodes, so chains are long and often still unfinished when wired.
                        let list = byQueue[q]
                        pick = list[max(0, list.count - 1 - rng.int(0..<min(list.count, 16)))]
                    } else {
                        let lo = max(0, i - 64)
                        let candidate = rng.int(lo..<i)
                        if queueOf[candidate] != q || !cross { pick = candidate }
                    }
                    if let p = pick, chosen.insert(p).inserted {
                        plan[i].append(p)
                        if queueOf[p] != q { crossEdges += 1 }
                    }
                }
                edges += plan[i].count
                maxFanIn = max(maxFanIn, plan[i].count)
                byQueue[q].append(i)
                let op = DagOp(ctx: ctx, index: i, work: rng.chance(0.1) ? UInt64(rng.int(1000...20000)) : 0,
                               completionWork: rng.chance(0.05) ? UInt64(rng.int(50_000...200_000)) : 0)
                op.installCompletion()
                if rng.chance(0.2) { op.queuePriority = [.veryLow, .low, .normal, .high, .veryHigh][rng.int(0..<5)] }
                ops.append(op)
            }
            let frozenOps = ops
            let frozenPlan = plan
            let frozenQueueOf = queueOf
            let roundSeed = rng.next()
            // Adder t wires and enqueues nodes t, t+T, t+2T… in order; some go in small batches.
            runThreads(ctx, adders, name: "dag-add") { t in
                var local = SplitMix64.derive(roundSeed, UInt64(t))
                var batch: [DagOp] = []
                var batchQueue = -1
                func flush() {
                    guard !batch.isEmpty else { return }
                    do { try queues[batchQueue].addOperations(batch) } catch {
                        ctx.violation("add-failed", "addOperations: \(error)")
                    }
                    batch.removeAll()
                }
                var i = t
                while i < frozenOps.count {
                    let op = frozenOps[i]
                    for p in frozenPlan[i] {
                        let up = frozenOps[p]
                        if up.isFinished && !up.completed.load(ordering: .acquiring) {
                            op.wiredLate.insert(p)
                            lateEdges.add(1, ordering: .relaxed)
                        }
                        do {
                            try op.addDependency(frozenOps[p])
                        } catch {
                            ctx.violation("add-failed", "addDependency \(i)->\(p): \(error)")
                        }
                    }
                    op.deps = frozenPlan[i].map { frozenOps[$0] }
                    let q = frozenQueueOf[i]
                    if local.chance(0.3) {
                        if batchQueue != q { flush(); batchQueue = q }
                        batch.append(op)
                        if batch.count >= 8 { flush() }
                    } else {
                        flush()
                        do { try queues[q].addOperation(op) } catch {
                            ctx.violation("add-failed", "addOperation \(i): \(error)")
                        }
                    }
                    i += adders
                }
                flush()
            }
            guard ctx.drain(queues, timeout: .seconds(30)) else { break }
            for op in frozenOps {
                if !op.isFinished { ctx.violation("not-finished", "op \(op.index): \(op)") }
                let r = op.runs.load(ordering: .relaxed)
                let c = op.completions.load(ordering: .relaxed)
                if r != 1 { ctx.violation("main-not-once", "op \(op.index) main ran \(r) times after drain") }
                if c != 1 { ctx.violation("completion-not-once", "op \(op.index) completion ran \(c) times after drain") }
            }
        }
        ctx.drain(queues)
        ctx.figure("rounds", "\(rounds)")
        ctx.figure("edges", "\(edges)")
        ctx.figure("cross-queue", "\(edges == 0 ? 0 : crossEdges * 100 / edges)%")
        ctx.figure("max-fan-in", "\(maxFanIn)")
        ctx.figure("late-edges", "\(lateEdges.load(ordering: .relaxed))")
    }
}
