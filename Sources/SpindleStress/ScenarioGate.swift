import Spindle
import Synchronization

// `gate`: operations with conditions and exclusivity categories over three queues (widths 1, 2, 4). Each round
// makes 48 operations, each in a random subset of three categories (declared in random order), a quarter with a
// condition that produces a dependency, some whose condition fails, a third depending on an earlier operation of
// the round added by the same thread (often on another queue); they are added from two threads at once, and a fifth are cancelled (some
// before they are added, some from a third thread at a random moment); one adding thread puts a barrier in the
// middle of its adds to a random queue (operations with categories behind it must not take them before it ran, or
// the round deadlocks). Invariants:
// - `exclusivity`: no two operations of a category are ever inside `main` at once;
// - `finished-once`: every operation finished, its completion block ran exactly once, `main` at most once;
// - `outcome`: not cancelled by the scenario: a passing (or absent) condition ran `main` once with no error; a
//   failing one never ran `main`, and finished failed with `SpindleError.conditionFailed` and
//   `cancellationReason == .conditionFailed`; cancelled before it was added: never ran, condition never asked;
// - `dependency-first`: a produced dependency had finished (its completion block returned) before the condition
//   was evaluated and before `main`;
// - `not-finished`: the queues drained every round (none lost, no category left held: the next round's
//   operations would wait for ever), and at the end one probe per category runs.

/// A category's occupancy, checked on entry.
final class GatedCategory: @unchecked Sendable {
    let name: String
    let inside = HighWater()
    init(name: String) { self.name = name }
}

/// What the scenario decided for one operation, and what it saw.
final class GatedPlan: @unchecked Sendable {
    enum Condition { case none, passes, fails }
    let condition: Condition
    let produces: Bool
    let cancelBeforeAdd: Bool
    let cancelLater: Bool
    let evaluations = Atomic<Int>(0)
    let asked = Atomic<Int>(0)
    var produced: GatedDependencyOp? = nil  // set by `dependency(for:)` on the adding thread, read after the drain

    init(condition: Condition, produces: Bool, cancelBeforeAdd: Bool, cancelLater: Bool) {
        self.condition = condition
        self.produces = produces
        self.cancelBeforeAdd = cancelBeforeAdd
        self.cancelLater = cancelLater
    }
}

/// The dependency a condition produces: a plain operation.
final class GatedDependencyOp: SpindleOperation, @unchecked Sendable {
    let live = LiveToken()
    let completed = Atomic<Bool>(false)  // its completion block returned (dependents become ready only after)

    override init() {
        super.init()
        self.completionBlock = { [unowned self] in self.completed.store(true, ordering: .releasing) }
    }

    override func main() throws { spin(ns: 2_000) }

    /// Finished as a dependency: finished, and its completion block returned.
    var finishedAsDependency: Bool { self.completed.load(ordering: .acquiring) && self.isFinished }
}

/// A condition following its plan; it checks that the dependency it produced had finished when it is evaluated.
struct GatedCondition: SpindleOperationCondition {
    let ctx: ScenarioContext
    let plan: GatedPlan
    let name = "stress-condition"

    func dependency(for operation: SpindleOperation) -> SpindleOperation? {
        self.plan.asked.add(1, ordering: .relaxed)
        guard self.plan.produces else { return nil }
        let dependency = GatedDependencyOp()
        self.plan.produced = dependency
        return dependency
    }

    func evaluate(for operation: SpindleOperation) -> SpindleConditionResult {
        self.plan.evaluations.add(1, ordering: .relaxed)
        if let produced = self.plan.produced, !produced.finishedAsDependency {
            self.ctx.violation("dependency-first", "a condition was evaluated before the dependency it produced finished")
        }
        return self.plan.condition == .fails ? .failed(GatedRefusal()) : .satisfied
    }
}

struct GatedRefusal: Error {}

/// A gated operation: enters its categories in `main` and checks nobody else is inside.
final class GatedOp: SpindleOperation, @unchecked Sendable {
    let live = LiveToken()
    let ctx: ScenarioContext
    let plan: GatedPlan
    let categories: [GatedCategory]
    let work: UInt64
    let runs = Atomic<Int>(0)
    let completions = Atomic<Int>(0)

    init(ctx: ScenarioContext, plan: GatedPlan, categories: [GatedCategory], work: UInt64) {
        self.ctx = ctx
        self.plan = plan
        self.categories = categories
        self.work = work
        super.init()
        self.completionBlock = { [unowned self] in self.completions.add(1, ordering: .relaxed) }
    }

    override func main() throws {
        self.runs.add(1, ordering: .relaxed)
        if let produced = self.plan.produced, !produced.finishedAsDependency {
            self.ctx.violation("dependency-first", "main began before the dependency its condition produced finished")
        }
        for category in self.categories where category.inside.enter() > 1 {
            self.ctx.violation("exclusivity", "two operations of category '\(category.name)' inside main at once")
        }
        spin(ns: self.work)
        for category in self.categories { category.inside.leave() }
    }
}

enum GatedScenario {
    static let invariants = ["exclusivity", "finished-once", "outcome", "dependency-first", "not-finished"]

    static func run(_ ctx: ScenarioContext) {
        var rng = SplitMix64.derive(ctx.seed, 29)
        let queues = [ctx.makeQueue("gate-1", width: 1), ctx.makeQueue("gate-2", width: 2),
                      ctx.makeQueue("gate-4", width: 4)]
        let prefix = "stress-gate-\(ctx.seed)"
        let categories = ["a", "b", "c"].map { GatedCategory(name: "\(prefix)-\($0)") }
        var rounds = 0, ran = 0, refused = 0, cancelled = 0, produced = 0
        while ctx.running {
            var ops: [GatedOp] = []
            for i in 0..<48 {
                let roll = rng.int(0...99)
                let plan = GatedPlan(condition: roll < 15 ? .fails : roll < 55 ? .passes : .none,
                                    produces: rng.int(0...3) == 0, cancelBeforeAdd: rng.int(0...19) == 0,
                                    cancelLater: rng.int(0...6) == 0)
                let mine = categories.filter { _ in rng.int(0...1) == 0 }.shuffled(using: &rng)
                let op = GatedOp(ctx: ctx, plan: plan, categories: mine, work: UInt64(rng.int(0...20_000)))
                for category in mine { try! op.addExclusivityCategory(category.name) }
                if plan.condition != .none || plan.produces { try! op.addCondition(GatedCondition(ctx: ctx, plan: plan)) }
                // An earlier operation added by the same thread (same parity): its add comes first, so a barrier can
                // never sit between a dependent added before it and a dependency added after it (a cycle of the
                // scenario's own making, not the library's).
                if i > 1 && rng.int(0...2) == 0 { try! op.addDependency(ops[i - 2 * rng.int(1...(i / 2))]) }
                if plan.cancelBeforeAdd { op.cancel() }
                ops.append(op)
            }
            let targets = ops.map { _ in queues[rng.int(0..<queues.count)] }
            let later = ops.filter { $0.plan.cancelLater }
            let pauses = later.map { _ in rng.int(0...300) }
            let plannedOps = ops
            let barrierQueue = queues[rng.int(0..<queues.count)]
            let barrierRan = Atomic<Int>(0)
            runThreads(ctx, 3, name: "gate-add") { t in
                if t == 2 {
                    for (op, pause) in zip(later, pauses) {
                        sleepMicros(pause)
                        op.cancel()
                    }
                    return
                }
                for (i, op) in plannedOps.enumerated() where i % 2 == t {
                    if t == 0 && i == plannedOps.count / 2 { barrierQueue.addBarrierBlock { barrierRan.add(1, ordering: .relaxed) } }
                    try! targets[i].addOperation(op)
                }
            }
            guard ctx.drain(queues) else {
                ctx.violation("not-finished", "round \(rounds) did not drain")
                return
            }
            ctx.check(barrierRan.load(ordering: .relaxed) == 1, "not-finished", "the round's barrier did not run once")
            for op in ops {
                self.check(ctx, op)
                if op.runs.load(ordering: .relaxed) > 0 { ran += 1 }
                if op.plan.produced != nil { produced += 1 }
                if op.cancellationReason == .conditionFailed { refused += 1 } else if op.isCancelled { cancelled += 1 }
            }
            ctx.count(ops.count)
            rounds += 1
        }
        // Nothing kept a category: one probe each runs.
        for category in categories {
            let probe = GatedDependencyOp()
            try! probe.addExclusivityCategory(category.name)
            try! queues[2].addOperation(probe)
            let done = (try? probe.waitUntilFinished(timeout: .seconds(15))) ?? false
            ctx.check(done, "not-finished", "a probe of category '\(category.name)' did not run: the category stayed held")
        }
        ctx.figure("rounds", "\(rounds)")
        ctx.figure("ran/refused/cancelled", "\(ran)/\(refused)/\(cancelled)")
        ctx.figure("produced", "\(produced)")
    }

    static func check(_ ctx: ScenarioContext, _ op: GatedOp) {
        let runs = op.runs.load(ordering: .relaxed)
        let completions = op.completions.load(ordering: .relaxed)
        ctx.check(op.isFinished && completions == 1 && runs <= 1, "finished-once",
                  "finished \(op.isFinished), completions \(completions), runs \(runs)")
        let plan = op.plan
        if plan.cancelBeforeAdd {
            ctx.check(runs == 0 && plan.asked.load(ordering: .relaxed) == 0
                          && plan.evaluations.load(ordering: .relaxed) == 0,
                      "outcome", "cancelled before it was added, yet ran \(runs) or its condition was asked")
            return
        }
        if let produced = plan.produced {
            ctx.check(produced.isFinished, "not-finished", "a produced dependency never finished")
        }
        if plan.cancelLater && op.isCancelled { return }  // anything up to one run
        let evaluations = plan.evaluations.load(ordering: .relaxed)
        switch plan.condition {
        case .fails:
            var typed = false
            if case .conditionFailed(_, "stress-condition", let underlying)? = op.error as? SpindleError {
                typed = underlying is GatedRefusal
            }
            ctx.check(runs == 0 && op.hasFailed && typed && op.cancellationReason == .conditionFailed
                          && evaluations == 1,
                      "outcome", "failing condition: runs \(runs), failed \(op.hasFailed), error "
                          + "\(String(describing: op.error)), reason \(String(describing: op.cancellationReason))")
        case .passes, .none:
            ctx.check(runs == 1 && op.error == nil && !op.isCancelled
                          && evaluations == (plan.condition == .none && !plan.produces ? 0 : 1),
                      "outcome", "passing: runs \(runs), evaluations \(evaluations), error "
                          + "\(String(describing: op.error)), cancelled \(op.isCancelled)")
        }
    }
}
