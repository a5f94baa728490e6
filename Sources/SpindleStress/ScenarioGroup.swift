import Spindle
import Synchronization

// `group`: group operations and produced operations on a serial and a 3-wide queue. Each round makes 16 groups
// (inner width 1-3, 0-6 children, a quarter holding a nested group with children of its own); children spin a
// little, some fail, some add 1-2 follow-ups from `main` (half with `produce`, half with `group.addOperation`).
// A tenth of the groups are cancelled before they are added, a quarter by another thread at a random moment; a
// third thread adds late children to random groups while they run or finish. Beside them, plain operations produce
// 0-3 operations each into their own queue, observed. Invariants:
// - `finish-once`: every group delivered `did isFinished` once and ran its completion block once;
// - `finished-before-child`: when a group became finished, every child it accepted had finished and run its
//   completion block (a child being added at that moment must then be refused);
// - `lost-child`: every accepted child finished, completion once, `main` at most once (once unless cancelled);
// - `ran-after-cancel`: no child began `main` uncancelled after its group's `cancel()` returned, and none added
//   after that ran at all;
// - `refused-untouched`: a refused add threw `groupFinished` and left the child unrun and unfinished;
// - `errors`: a group's `childErrors` hold one error per failed child (its `error` is set exactly then);
// - `unexpected-error`: no other add or produce failed (a running child's follow-up is never refused);
// - `produced-ran-once`: every produced operation ran exactly once, on its producer's queue, and each producer's
//   observers were told of each one once;
// - `not-finished`: every group finished (the queues drained); `thread-leak`: threads back to the baseline (plus
//   the shared pool's threads not yet started, which it keeps once started) once
//   the groups and queues are released.

struct GroupFailure: Error {}

/// A group made by the scenario (counted as a live harness object).
final class StressGroup: SpindleGroupOperation, @unchecked Sendable {
    let live = LiveToken()
}

/// One group and what happened to it.
final class GroupPlan: @unchecked Sendable {
    let group: StressGroup
    let registered = SpindleLockedValue<[SpindleOperation]>([])  // every child whose add began, in order
    let refused = SpindleLockedValue<Set<ObjectIdentifier>>([])
    let unfinishedAtFinish = SpindleLockedValue<[ObjectIdentifier]>([])
    let unexpected = SpindleLockedValue<[String]>([])
    let finishEvents = Atomic<Int>(0)
    let completions = AtomicCounter()
    let cancelReturned = Atomic<Bool>(false)
    let lateRuns = Atomic<Int>(0)
    var nested: [GroupPlan] = []  // set before the group is added

    init(width: Int) {
        self.group = try! StressGroup(maxConcurrentOperationCount: width)
        self.group.completionBlock = { [completions] in completions.n.add(1, ordering: .relaxed) }
        self.group.observe([.isFinished]) { [weak self] _, change in
            guard let self, change.phase == .did else { return }
            self.finishEvents.add(1, ordering: .relaxed)
            let early = self.registered.withLockedValue { list in
                list.filter { !$0.isFinished || (($0 as? GroupChild)?.completions.n.load(ordering: .acquiring) ?? 1) != 1 }
            }
            self.unfinishedAtFinish.withLockedValue { $0 += early.map(ObjectIdentifier.init) }
        }
    }

    /// Registers `child`, then adds it with `add`; returns whether it was accepted. `groupFinished` is recorded as a
    /// refusal, any other error as unexpected.
    @discardableResult
    func add(_ child: SpindleOperation, _ add: () throws -> Void) -> Bool {
        self.registered.withLockedValue { $0.append(child) }
        do {
            try add()
            return true
        } catch {
            if case .groupFinished? = error as? SpindleError {
                self.refused.withLockedValue { _ = $0.insert(ObjectIdentifier(child)) }
            } else {
                self.unexpected.withLockedValue { $0.append("\(error)") }
            }
            return false
        }
    }

    /// This group's plan and its nested groups' (cancelling this group cancels theirs).
    var all: [GroupPlan] { [self] + self.nested.flatMap(\.all) }
}

/// A child: spins, adds its follow-ups, fails if told to.
final class GroupChild: SpindleOperation, @unchecked Sendable {
    let live = LiveToken()
    /// Weak: the plan lists its children. Gone only if this child ran after its round was checked (which the checks
    /// then reported: it was unfinished).
    weak var plan: GroupPlan?
    let fails: Bool
    let work: UInt64
    let followUps: Int
    var addedAfterCancel = false  // written before its add publishes it
    let runs = Atomic<Int>(0)
    let completions = AtomicCounter()

    init(plan: GroupPlan, fails: Bool, work: UInt64, followUps: Int) {
        self.plan = plan
        self.fails = fails
        self.work = work
        self.followUps = followUps
        super.init()
        self.completionBlock = { [completions] in completions.n.add(1, ordering: .relaxed) }
    }

    override func main() throws {
        guard let plan = self.plan else { return }
        let afterCancel = plan.cancelReturned.load(ordering: .acquiring)
        if self.addedAfterCancel || (afterCancel && !self.isCancelled) {
            plan.lateRuns.add(1, ordering: .relaxed)
        }
        self.runs.add(1, ordering: .relaxed)
        spin(ns: self.work)
        for i in 0..<self.followUps {
            let next = GroupChild(plan: plan, fails: false, work: self.work / 2, followUps: 0)
            next.addedAfterCancel = plan.cancelReturned.load(ordering: .acquiring)
            let accepted = plan.add(next) {
                if i % 2 == 0 { try self.produce(next) } else { try plan.group.addOperation(next) }
            }
            if !accepted { plan.unexpected.withLockedValue { $0.append("a running child's follow-up refused") } }
        }
        if self.fails { throw GroupFailure() }
    }
}

/// A plain operation that produces operations into its own queue.
final class Producer: SpindleOperation, @unchecked Sendable {
    let live = LiveToken()
    let produced: [Produced]
    let told = AtomicCounter()
    let failures = Atomic<Int>(0)
    init(count: Int, queueName: String) {
        self.produced = (0..<count).map { _ in Produced(queueName: queueName) }
        super.init()
        self.observe([.producedOperation]) { [told] _, _ in told.n.add(1, ordering: .relaxed) }
    }
    override func main() throws {
        for op in self.produced {
            do { try self.produce(op) } catch { self.failures.add(1, ordering: .relaxed) }
        }
    }
}

/// A produced operation: counts its runs and where it ran.
final class Produced: SpindleOperation, @unchecked Sendable {
    let live = LiveToken()
    let queueName: String
    let runs = Atomic<Int>(0)
    let elsewhere = Atomic<Int>(0)
    init(queueName: String) { self.queueName = queueName }
    override func main() throws {
        self.runs.add(1, ordering: .relaxed)
        if SpindleOperationQueue.current?.name != self.queueName { self.elsewhere.add(1, ordering: .relaxed) }
    }
}

enum GroupScenario {
    static let invariants = ["finish-once", "finished-before-child", "lost-child", "ran-after-cancel",
                             "refused-untouched", "errors", "unexpected-error", "produced-ran-once", "not-finished",
                             "thread-leak"]

    static func run(_ ctx: ScenarioContext) {
        var lastCount = -1  // baseline: let earlier scenarios' detached threads exit first
        for _ in 0..<20 where threadCount() != lastCount {
            lastCount = threadCount()
            sleepMicros(50_000)
        }
        // Groups run their children on the process's shared pool, which keeps the threads it starts (up to its
        // thread count; stand-ins for blocked ones retire): those it may still start are not a leak.
        let shared = SpindleThreadPool.shared
        let baseThreads = threadCount() + max(0, shared.threadCount - shared.liveThreadCount)
        let rounds = self.rounds(ctx)  // the queues and groups are released when it returns
        let endThreads = ChurnScenario.settle(threadCount, to: baseThreads, seconds: 5)
        if endThreads > baseThreads {
            ctx.violation("thread-leak", "threads \(baseThreads) -> \(endThreads) after 5 s", count: endThreads - baseThreads)
        }
        ctx.figure("rounds", "\(rounds)")
        ctx.figure("threads", "\(baseThreads)->\(endThreads)")
    }

    private static func rounds(_ ctx: ScenarioContext) -> Int {
        var rng = SplitMix64.derive(ctx.seed, 24)
        let queues = [ctx.makeQueue("group-serial", width: 1), ctx.makeQueue("group-3", width: 3)]
        var rounds = 0
        var (children, refused, cancelled, produced) = (0, 0, 0, 0)
        while ctx.running {
            let plans = (0..<16).map { _ in self.makeGroup(&rng, nesting: rng.int(0...3) == 0) }
            var producers: [Producer] = []
            for i in 0..<8 { producers.append(Producer(count: rng.int(0...3), queueName: queues[i % 2].name)) }
            let cancelledEarly = plans.map { _ in rng.int(0...9) == 0 }
            for (plan, early) in zip(plans, cancelledEarly) where early { self.cancel(plan) }
            for (i, plan) in plans.enumerated() { try! queues[i % 2].addOperation(plan.group) }
            for (i, producer) in producers.enumerated() { try! queues[i % 2].addOperation(producer) }
            let toCancel = plans.filter { _ in rng.int(0...3) == 0 }
            let pauses = (0..<(toCancel.count + 16)).map { _ in rng.int(0...200) }
            let lateTargets = (0..<16).map { _ in rng.int(0..<plans.count) }
            runThreads(ctx, 2, name: "group-race") { t in
                if t == 0 {
                    for (plan, pause) in zip(toCancel, pauses) {
                        sleepMicros(pause)
                        self.cancel(plan)
                    }
                } else {
                    for (target, pause) in zip(lateTargets, pauses.suffix(16)) {
                        sleepMicros(pause)
                        let plan = plans[target]
                        let late = GroupChild(plan: plan, fails: false, work: 1_000, followUps: 0)
                        late.addedAfterCancel = plan.cancelReturned.load(ordering: .acquiring)
                        plan.add(late) { try plan.group.addOperation(late) }
                    }
                }
            }
            guard ctx.drain(queues) else { ctx.violation("not-finished", "round \(rounds) did not drain"); return rounds }
            var made = 0
            for plan in plans.flatMap(\.all) {
                self.check(ctx, plan)
                let registered = plan.registered.withLockedValue { $0.count }
                made += registered
                children += registered
                refused += plan.refused.withLockedValue { $0.count }
                if plan.group.isCancelled { cancelled += 1 }
            }
            for producer in producers {
                self.check(ctx, producer)
                made += producer.produced.count + 1
                produced += producer.produced.count
            }
            ctx.count(made + plans.count)
            rounds += 1
        }
        ctx.figure("children", "\(children) (\(refused) refused late)")
        ctx.figure("cancelled groups", "\(cancelled)")
        ctx.figure("produced", "\(produced)")
        return rounds
    }

    /// A group with 0-6 children (and, if `nesting`, a nested group with children of its own).
    private static func makeGroup(_ rng: inout SplitMix64, nesting: Bool) -> GroupPlan {
        let plan = GroupPlan(width: rng.int(1...3))
        for _ in 0..<rng.int(0...6) {
            let child = GroupChild(plan: plan, fails: rng.int(0...4) == 0, work: UInt64(rng.int(0...20_000)),
                                   followUps: rng.int(0...3) == 0 ? rng.int(1...2) : 0)
            plan.add(child) { try plan.group.addOperation(child) }
        }
        if nesting {
            let inner = self.makeGroup(&rng, nesting: false)
            plan.nested.append(inner)
            plan.add(inner.group) { try plan.group.addOperation(inner.group) }
        }
        return plan
    }

    /// Cancels the group (which cancels its nested groups), then marks it and them as cancelled.
    private static func cancel(_ plan: GroupPlan) {
        plan.group.cancel()
        for p in plan.all { p.cancelReturned.store(true, ordering: .releasing) }
    }

    static func check(_ ctx: ScenarioContext, _ plan: GroupPlan) {
        let group = plan.group
        ctx.check(group.isFinished, "not-finished", "a group of a drained queue is not finished")
        ctx.check(plan.finishEvents.load(ordering: .relaxed) == 1 && plan.completions.n.load(ordering: .relaxed) == 1,
                  "finish-once", "did isFinished \(plan.finishEvents.load(ordering: .relaxed))x, completion "
                      + "\(plan.completions.n.load(ordering: .relaxed))x")
        let refused = plan.refused.withLockedValue { $0 }
        let early = plan.unfinishedAtFinish.withLockedValue { $0 }.filter { !refused.contains($0) }
        ctx.check(early.isEmpty, "finished-before-child", "\(early.count) accepted child(ren) unfinished at the end")
        ctx.check(plan.lateRuns.load(ordering: .relaxed) == 0, "ran-after-cancel",
                  "\(plan.lateRuns.load(ordering: .relaxed)) child(ren) ran after cancel() returned")
        for message in plan.unexpected.withLockedValue({ $0 }) { ctx.violation("unexpected-error", message) }
        var failed = 0
        for child in plan.registered.withLockedValue({ $0 }) {
            let runs = (child as? GroupChild)?.runs.load(ordering: .relaxed) ?? 0
            if refused.contains(ObjectIdentifier(child)) {
                ctx.check(runs == 0 && !child.isFinished, "refused-untouched", "a refused child ran or finished")
                continue
            }
            if let child = child as? GroupChild {
                let completions = child.completions.n.load(ordering: .relaxed)
                ctx.check(child.isFinished && completions == 1 && runs <= 1 && (runs == 1 || child.isCancelled),
                          "lost-child", "child: finished \(child.isFinished), completion \(completions)x, ran \(runs)x")
                if child.fails && runs == 1 { failed += 1 }
            } else {
                ctx.check(child.isFinished, "lost-child", "a nested group is not finished")
                if child.error != nil { failed += 1 }
            }
        }
        let errors = group.childErrors.count
        ctx.check(errors == failed && (group.error != nil) == (failed > 0), "errors",
                  "\(failed) failed child(ren), \(errors) child error(s), group error \(group.error != nil)")
    }

    static func check(_ ctx: ScenarioContext, _ producer: Producer) {
        let told = producer.told.n.load(ordering: .relaxed)
        let bad = producer.produced.filter {
            $0.runs.load(ordering: .relaxed) != 1 || $0.elsewhere.load(ordering: .relaxed) != 0
        }
        ctx.check(bad.isEmpty && told == producer.produced.count && producer.failures.load(ordering: .relaxed) == 0,
                  "produced-ran-once", "\(bad.count) of \(producer.produced.count) produced ran wrongly; told \(told)x; "
                      + "\(producer.failures.load(ordering: .relaxed)) produce(s) failed")
    }
}
