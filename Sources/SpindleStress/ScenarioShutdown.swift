import Spindle
import Synchronization

// `shutdown`: queues shut down (drain, cancel, or drain escalated to cancel; from outside or from one of their own
// operations) while two threads add to them as fast as they can, some queues bounded so that producers are blocked
// when the shutdown comes, and a third thread already awaits the termination. Invariants:
// - `accepted-lost`: an add that returned normally: its operation finished, its completion ran exactly once, and
//   under a plain drain its `main` ran exactly once;
// - `refused-touched`: an add refused with `queueShutDown`: its operation is untouched (ready, not finished, not
//   cancelled, never run, no completion); `addOperation { }` refused hands back its operation finished as cancelled
//   with the block never run;
// - `accepted-after-refusal`: once an add was refused, no later add on that queue is accepted;
// - `termination-timeout`: `awaitTermination` returns true within 10 s of the shutdown, for the waiter that was
//   already waiting and for the one that asks after; `isTerminated` is then true;
// - `wrong-error`: adds fail only with `queueShutDown`;
// - `thread-leak`: the thread count comes back to its baseline (every worker joined).

final class ShutdownProbe: SpindleOperation, @unchecked Sendable {
    let live = LiveToken()
    let runs = Atomic<Int>(0)
    let completions = Atomic<Int>(0)
    let work: UInt64

    init(work: UInt64) {
        self.work = work
        super.init()
        self.completionBlock = { [unowned self] in self.completions.add(1, ordering: .relaxed) }
    }

    override func main() {
        self.runs.add(1, ordering: .relaxed)
        spin(ns: self.work)
    }
}

/// A flag set from an operation's block.
final class ShutdownFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { self.value.store(true, ordering: .releasing) }
    var isSet: Bool { self.value.load(ordering: .acquiring) }
}

enum ShutdownScenario {
    static let invariants = ["accepted-lost", "refused-touched", "accepted-after-refusal", "termination-timeout",
                             "wrong-error", "thread-leak"]

    /// What one add did: the operation, and whether the add accepted it.
    struct Record {
        let op: ShutdownProbe
        let accepted: Bool
    }

    static func run(_ ctx: ScenarioContext) {
        var rng = SplitMix64.derive(ctx.seed, 17)
        // The process deadline timer's thread lives as long as the process once started (the fault pass's failed
        // thread starts schedule retries on it): start it before the baseline, so it is not counted as a leak.
        for _ in 0..<50 {
            let op = SpindleBlockOperation {}
            op.cancel(after: .milliseconds(1))
            let end = nowNs() + 50_000_000
            while !op.isCancelled && nowNs() < end { sleepMicros(1_000) }
            if op.isCancelled { break }
        }
        // Baseline: let earlier scenarios' detached threads exit first.
        var lastCount = -1
        for _ in 0..<20 where threadCount() != lastCount {
            lastCount = threadCount()
            sleepMicros(50_000)
        }
        let baseThreads = threadCount()
        var rounds = 0
        var refusedTotal = 0
        while ctx.running {
            refusedTotal += self.round(ctx, &rng, index: rounds)
            rounds += 1
        }
        ctx.figure("rounds", "\(rounds)")
        ctx.figure("refused adds", "\(refusedTotal)")
        let endThreads = ChurnScenario.settle(threadCount, to: baseThreads, seconds: 5)
        if endThreads > baseThreads {
            ctx.violation("thread-leak", "threads \(baseThreads) -> \(endThreads) after 5 s", count: endThreads - baseThreads)
        }
    }

    /// One queue, added to by two threads, shut down by a third while a fourth awaits its termination. Returns the
    /// refused adds.
    static func round(_ ctx: ScenarioContext, _ rng: inout SplitMix64, index: Int) -> Int {
        let queue = ctx.makeQueue("shutdown-\(index)", width: rng.int(1...4))
        if rng.chance(0.3) { try! queue.setCapacity(rng.int(1...8), whenFull: .block) }
        let mode = rng.int(0..<4)  // 0, 1: drain; 2: cancel; 3: drain, then cancel
        let fromInside = rng.chance(0.2)
        let delayNs = UInt64(rng.int(0...300_000))
        let seed = rng.next()
        let records = SpindleLockedValue<[Record]>([])
        let waiterResult = SpindleLockedValue<Bool?>(nil)
        runThreads(ctx, 4, name: "sd") { role in
            switch role {
            case 0, 1: self.add(ctx, queue, role: role, seed: seed, drainOnly: mode < 2, into: records)
            case 2:
                spin(ns: delayNs)
                if fromInside {
                    try? queue.addOperation(SpindleBlockOperation { queue.shutdown(mode == 2 ? .cancel : .drain) })
                }
                queue.shutdown(mode == 2 ? .cancel : .drain)
                if mode == 3 {
                    spin(ns: delayNs / 2)
                    queue.shutdown(.cancel)
                }
            default:
                let terminated = (try? queue.awaitTermination(timeout: .seconds(10))) ?? false
                waiterResult.withLockedValue { $0 = terminated }
            }
        }
        let terminated = (try? queue.awaitTermination(timeout: .seconds(10))) ?? false
        if !terminated || waiterResult.value != true || !queue.isTerminated {
            ctx.violation("termination-timeout", "queue '\(queue.name)' did not terminate in 10 s "
                + "(waiter: \(String(describing: waiterResult.value)))")
            Output.error(queue.debugDescription)
        }
        var refused = 0
        for record in records.value {
            let op = record.op
            let runs = op.runs.load(ordering: .relaxed)
            let completions = op.completions.load(ordering: .relaxed)
            if record.accepted {
                let drained = mode < 2
                if !op.isFinished || completions != 1 || runs > 1 || (drained && runs != 1) {
                    ctx.violation("accepted-lost", "accepted op: finished \(op.isFinished), completions \(completions), "
                        + "runs \(runs), mode \(mode)")
                }
            } else {
                refused += 1
                if runs != 0 || completions != 0 || op.isFinished || op.isCancelled || !op.isReady {
                    ctx.violation("refused-touched", "refused op: runs \(runs), completions \(completions), "
                        + "finished \(op.isFinished), cancelled \(op.isCancelled)")
                }
            }
            ctx.count()
        }
        return refused
    }

    /// Adds until the queue refuses, then a few more times (each must be refused too).
    /// `drainOnly`: nothing cancels this queue's operations, so a block operation handed back cancelled was refused.
    static func add(_ ctx: ScenarioContext, _ queue: SpindleOperationQueue, role: Int, seed: UInt64, drainOnly: Bool,
                    into records: SpindleLockedValue<[Record]>) {
        var rng = SplitMix64.derive(seed, UInt64(role))
        var mine: [Record] = []
        var refusals = 0
        var n = 0
        while refusals < 4 && n < 2_000 {
            n += 1
            if drainOnly && rng.chance(0.1) {
                // The non-throwing form: refused, it hands back its operation finished as cancelled, never run.
                let ran = ShutdownFlag()
                let op = queue.addOperation { ran.set() }
                if op.isCancelled {
                    if !op.isFinished || ran.isSet {
                        ctx.violation("refused-touched", "a refused block operation: finished \(op.isFinished), "
                            + "block ran \(ran.isSet)")
                    }
                    refusals += 1
                } else if refusals > 0 {
                    ctx.violation("accepted-after-refusal", "queue '\(queue.name)' accepted an add after refusing one")
                }
                continue
            }
            let op = ShutdownProbe(work: UInt64(rng.int(0...5_000)))
            do {
                if rng.chance(0.2) {
                    try queue.addOperation(op, timeout: .seconds(5))
                } else {
                    try queue.addOperation(op)
                }
                if refusals > 0 {
                    ctx.violation("accepted-after-refusal", "queue '\(queue.name)' accepted an add after refusing one")
                }
                mine.append(Record(op: op, accepted: true))
            } catch SpindleError.queueShutDown {
                refusals += 1
                mine.append(Record(op: op, accepted: false))
            } catch {
                ctx.violation("wrong-error", "add failed with \(error)")
            }
        }
        records.withLockedValue { $0 += mine }
    }
}
