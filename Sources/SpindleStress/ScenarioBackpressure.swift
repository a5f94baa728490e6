import Spindle
import Synchronization

// `backpressure`: rounds of bounded queues (capacity 1-8, width 1-4, policy block, reject or callerRuns) fed by
// producer threads that add faster than the queue runs (plain adds, timed adds with 0-3 ms timeouts, batches),
// plus one async producer per round that suspends for room. A monitor thread samples `snapshot()` meanwhile.
// Invariants: every operation whose add returned normally runs exactly once (on the queue or, caller-runs, on the
// producer); every refused operation (queueFull, batchExceedsCapacity) never runs and is left unfinished; the
// capacity is never exceeded (the queue's high-water mark and every sample); every producer returns (the harness
// flags a stuck thread); a timed add never gives up early and never much later than its deadline.

final class BackpressureOp: SpindleOperation, @unchecked Sendable {
    let live = LiveToken()
    let runs = Atomic<Int>(0)
    let work: UInt64
    init(work: UInt64) {
        self.work = work
        super.init()
    }
    override func main() throws {
        self.runs.add(1, ordering: .relaxed)
        spin(ns: self.work)
    }
}

enum BackpressureScenario {
    static let invariants = ["lost", "ran-twice", "refused-ran", "capacity-exceeded", "timed-add-early",
                             "timed-add-late", "async-producer", "unexpected-error", "drain-timeout"]

    /// What became of one operation, as its producer saw it.
    struct Outcome: Sendable {
        let op: BackpressureOp
        let added: Bool
    }

    static func run(_ ctx: ScenarioContext) {
        var rng = SplitMix64.derive(ctx.seed, 15)
        let policies: [SpindleFullQueuePolicy] = [.block, .reject, .callerRuns]
        let producers = max(2, ctx.config.threads)
        let totals = SpindleLockedValue<(added: Int, refused: Int, timedOut: Int, callerRan: Int, rounds: Int,
                                         maxOvershootNs: UInt64, peakBlocked: Int)>((0, 0, 0, 0, 0, 0, 0))
        var round = 0
        while ctx.running {
            round += 1
            let capacity = rng.int(1...8), width = rng.int(1...4)
            let policy = policies[rng.int(0..<3)]
            let q = ctx.makeQueue("backpressure-\(round)", width: width)
            try! q.setCapacity(capacity, whenFull: policy)
            let roundEnd = nowNs() + min(ctx.timeLeftNs, UInt64(rng.int(150...400)) * 1_000_000)
            let seed = rng.next()
            let outcomes = SpindleLockedValue<[Outcome]>([])
            let monitorStop = Atomic<Bool>(false)
            let monitorDone = try! SpindleSemaphore(value: 0)
            _ = try? SpindleThread.detach(name: "bp-monitor") {
                var peakBlocked = 0
                while !monitorStop.load(ordering: .acquiring) {
                    let s = q.snapshot()
                    if s.operationCount > capacity {
                        ctx.violation("capacity-exceeded", "sampled \(s.operationCount) operations, capacity \(capacity)")
                    }
                    peakBlocked = max(peakBlocked, s.blockedProducers)
                    sleepMicros(200)
                }
                totals.withLockedValue { $0.peakBlocked = max($0.peakBlocked, peakBlocked) }
                monitorDone.signal()
            }
            // The async producer: suspends for room, never blocks a thread.
            let asyncDone = try! SpindleSemaphore(value: 0)
            let asyncCount = rng.int(5...40)
            Task {
                var mine: [Outcome] = []
                for _ in 0..<asyncCount {
                    let op = BackpressureOp(work: 2_000)
                    do {
                        try await q.addOperationWhenRoom(op)
                        mine.append(Outcome(op: op, added: true))
                    } catch {
                        ctx.violation("async-producer", "addOperationWhenRoom threw \(error)")
                        mine.append(Outcome(op: op, added: false))
                    }
                }
                outcomes.withLockedValue { $0.append(contentsOf: mine) }
                asyncDone.signal()
            }
            runThreads(ctx, producers, name: "bp-producer") { p in
                var g = SplitMix64.derive(seed, UInt64(p))
                var mine: [Outcome] = []
                var timedOut = 0
                var overshoot: UInt64 = 0
                while nowNs() < roundEnd && ctx.running {
                    let work = UInt64(g.int(0...20_000))
                    switch g.int(0..<10) {
                    case 0, 1:
                        // A timed add: waits for room up to its deadline whatever the policy.
                        let op = BackpressureOp(work: work)
                        let timeout = UInt64(g.int(0...3_000)) * 1_000
                        let start = nowNs()
                        do {
                            try q.addOperation(op, until: SpindleDeadline(uptimeNanoseconds: start + timeout))
                            mine.append(Outcome(op: op, added: true))
                        } catch SpindleError.queueFull(_, _) {
                            let elapsed = nowNs() - start
                            if elapsed < timeout {
                                ctx.violation("timed-add-early", "gave up after \(elapsed) ns of \(timeout) ns")
                            }
                            if elapsed > timeout + 2_000_000_000 {
                                ctx.violation("timed-add-late", "gave up \((elapsed - timeout) / 1_000_000) ms late")
                            }
                            overshoot = max(overshoot, elapsed > timeout ? elapsed - timeout : 0)
                            timedOut += 1
                            mine.append(Outcome(op: op, added: false))
                        } catch {
                            ctx.violation("unexpected-error", "timed add threw \(error)")
                            mine.append(Outcome(op: op, added: false))
                        }
                    case 2:
                        // A batch (all or nothing); sometimes larger than the capacity.
                        let ops = (0..<g.int(1...(capacity + 1))).map { _ in BackpressureOp(work: work / 4) }
                        do {
                            try q.addOperations(ops)
                            mine.append(contentsOf: ops.map { Outcome(op: $0, added: true) })
                        } catch SpindleError.queueFull(_, _) {
                            mine.append(contentsOf: ops.map { Outcome(op: $0, added: false) })
                        } catch SpindleError.batchExceedsCapacity(_, _, _) {
                            if ops.count <= capacity { ctx.violation("unexpected-error", "batch of \(ops.count) refused") }
                            mine.append(contentsOf: ops.map { Outcome(op: $0, added: false) })
                        } catch {
                            ctx.violation("unexpected-error", "batch add threw \(error)")
                            mine.append(contentsOf: ops.map { Outcome(op: $0, added: false) })
                        }
                    default:
                        let op = BackpressureOp(work: work)
                        do {
                            try q.addOperation(op)
                            mine.append(Outcome(op: op, added: true))
                        } catch SpindleError.queueFull(_, _) {
                            if policy != .reject { ctx.violation("unexpected-error", "queueFull under \(policy)") }
                            mine.append(Outcome(op: op, added: false))
                        } catch {
                            ctx.violation("unexpected-error", "add threw \(error)")
                            mine.append(Outcome(op: op, added: false))
                        }
                    }
                }
                outcomes.withLockedValue { $0.append(contentsOf: mine) }
                totals.withLockedValue {
                    $0.timedOut += timedOut
                    $0.maxOvershootNs = max($0.maxOvershootNs, overshoot)
                }
            }
            if !asyncDone.wait(timeout: .seconds(30)) {
                ctx.violation("async-producer", "the async producer did not finish within 30 s")
            }
            let drained = ctx.drain([q])
            monitorStop.store(true, ordering: .releasing)
            _ = monitorDone.wait(timeout: .seconds(5))
            guard drained else { return }
            let s = q.snapshot()
            if s.highWaterOperationCount > capacity {
                ctx.violation("capacity-exceeded", "high-water mark \(s.highWaterOperationCount), capacity \(capacity)")
            }
            let all = outcomes.withLockedValue { $0 }
            var added = 0, refused = 0
            for outcome in all {
                let runs = outcome.op.runs.load(ordering: .acquiring)
                if outcome.added {
                    added += 1
                    if runs == 0 || !outcome.op.isFinished {
                        ctx.violation("lost", "an added operation never ran (round \(round), \(policy))")
                    } else if runs > 1 {
                        ctx.violation("ran-twice", "an operation ran \(runs) times")
                    }
                    ctx.count()
                } else {
                    refused += 1
                    if runs != 0 || outcome.op.isFinished {
                        ctx.violation("refused-ran", "a refused operation ran (round \(round), \(policy))")
                    }
                }
            }
            if s.finished + s.ranOnCaller != added {
                ctx.violation("lost", "queue finished \(s.finished) + ran on caller \(s.ranOnCaller) != added \(added)")
            }
            totals.withLockedValue {
                $0.added += added
                $0.refused += refused
                $0.callerRan += s.ranOnCaller
                $0.rounds += 1
            }
        }
        let t = totals.withLockedValue { $0 }
        ctx.figure("rounds", "\(t.rounds)")
        ctx.figure("added", "\(t.added)")
        ctx.figure("refused", "\(t.refused) (timed out \(t.timedOut))")
        ctx.figure("ran on caller", "\(t.callerRan)")
        ctx.figure("peak blocked producers", "\(t.peakBlocked)")
        ctx.figure("timed-add overshoot max", "\(fmt(Double(t.maxOvershootNs) / 1e6, 2)) ms")
    }
}
