import Spindle
import Synchronization

// `blocks`: SpindleBlockOperation with 1–200 blocks (mostly a few, sometimes dozens or 200, so the helper-thread
// cap of 64 is crossed), blocks given at init and/or by addExecutionBlock, run on queues of widths 1, 2 and ncpu
// or started by hand (start() on a helper thread, or SpindleOperation.perform). Some are cancelled before they
// are added or started, some are cancelled at a random moment, and some have blocks added by a racing thread
// while they may be starting.
//
// Invariants: every block of an operation that was not cancelled runs exactly once; a cancelled operation runs
// all of its blocks or none (main checks once, before the first block); the blocks of an operation cancelled
// before it was added or started never run; a block runs while its operation is executing and not finished;
// a block accepted by a racing addExecutionBlock runs exactly once (if the operation ran its blocks), and a
// rejected one (blockOperationStarted, the only acceptable error) never runs; the completion block runs exactly
// once, after isFinished; the operation finishes exactly once (observers see one `did isFinished`).

/// Per-block run counts of one block operation, and the operation's finish/completion counts.
final class BlockTally: @unchecked Sendable {
    let ctx: ScenarioContext
    let index: Int
    let counts: SpindleLockedValue<[Int]>
    let completions = Atomic<Int>(0)
    let finishEvents = Atomic<Int>(0)
    weak var op: SpindleOperation?

    init(ctx: ScenarioContext, index: Int) {
        self.ctx = ctx
        self.index = index
        self.counts = SpindleLockedValue([])
    }

    /// A block that records its run under slot `slot` (slots are reserved with `reserve`).
    func block(_ slot: Int) -> @Sendable () -> Void {
        { [self] in
            self.counts.withLockedValue { $0[slot] += 1 }
            if let op = self.op, !op.isExecuting || op.isFinished {
                self.ctx.violation("block-outside-execution", "op \(self.index) block \(slot): executing "
                    + "\(op.isExecuting) finished \(op.isFinished)")
            }
        }
    }

    /// Reserves `n` new slots; returns the first.
    func reserve(_ n: Int) -> Int {
        self.counts.withLockedValue { c in
            let first = c.count
            c.append(contentsOf: repeatElement(0, count: n))
            return first
        }
    }
}

enum BlocksScenario {
    static let invariants = ["block-not-once", "block-after-precancel", "blocks-partial", "block-outside-execution",
                             "accepted-block-lost", "rejected-block-ran", "wrong-error", "completion-not-once",
                             "completion-before-finished", "finish-not-once", "not-finished", "drain-timeout",
                             "thread-stuck"]

    /// Mostly small block counts, with a tail up to 200 (past the 64-helper cap).
    static func blockCount(_ rng: inout SplitMix64) -> Int {
        switch rng.int(0..<100) {
        case 0..<50: return rng.int(1...4)
        case 50..<85: return rng.int(5...16)
        case 85..<96: return rng.int(17...70)
        default: return rng.int(150...200)
        }
    }

    static func run(_ ctx: ScenarioContext) {
        var rng = SplitMix64.derive(ctx.seed, 20)
        let queues = [ctx.makeQueue("blocks-serial", width: 1), ctx.makeQueue("blocks-w2", width: 2),
                      ctx.makeQueue("blocks-ncpu", width: ctx.config.ncpu)]
        var rounds = 0
        let blocksRun = Atomic<Int>(0)
        var maxBlocks = 0
        var racingAccepted = 0
        var racingRejected = 0
        while ctx.running {
            rounds += 1
            let n = rng.int(8...40)
            var ops: [StressBlockOp] = []
            var tallies: [BlockTally] = []
            var preCancelled: [Bool] = []
            var byHand: [Bool] = []
            var racing: [Bool] = []
            var observed: [Bool] = []
            for i in 0..<n {
                let tally = BlockTally(ctx: ctx, index: i)
                let total = blockCount(&rng)
                maxBlocks = max(maxBlocks, total)
                let first = tally.reserve(total)
                let op: StressBlockOp
                var next = first
                if rng.chance(0.5) {
                    op = StressBlockOp(tally.block(next))
                    next += 1
                } else {
                    op = StressBlockOp()
                }
                while next < first + total {
                    try! op.addExecutionBlock(tally.block(next))
                    next += 1
                }
                tally.op = op
                op.completionBlock = { [unowned op] in
                    let c = tally.completions.add(1, ordering: .relaxed).newValue
                    if c != 1 { ctx.violation("completion-not-once", "op \(i) completion ran \(c) times") }
                    if !op.isFinished { ctx.violation("completion-before-finished", "op \(i)") }
                    ctx.count()
                }
                let watch = rng.chance(0.3)
                observed.append(watch)
                if watch {
                    op.observe([.isFinished]) { _, change in
                        if change.phase == .did { tally.finishEvents.add(1, ordering: .relaxed) }
                    }
                }
                let pre = rng.chance(0.15)
                if pre { op.cancel() }
                ops.append(op)
                tallies.append(tally)
                preCancelled.append(pre)
                byHand.append(rng.chance(0.25))
                racing.append(!pre && rng.chance(0.2))
            }
            let frozen = ops, byHandF = byHand, racingF = racing, talliesF = tallies
            let queueOf = (0..<n).map { _ in rng.int(0..<queues.count) }
            let roundSeed = rng.next()
            // Racing adders record which of their blocks were accepted (slot, accepted).
            let raced = SpindleLockedValue<[(op: Int, slot: Int, accepted: Bool)]>([])
            let hand = (0..<n).filter { byHand[$0] }
            // Thread 0 adds to queues, thread 1 starts by hand, thread 2 races addExecutionBlock, thread 3 cancels.
            runThreads(ctx, 4, name: "blocks") { t in
                var local = SplitMix64.derive(roundSeed, UInt64(t))
                switch t {
                case 0:
                    for i in 0..<n where !byHandF[i] { try! queues[queueOf[i]].addOperation(frozen[i]) }
                case 1:
                    for i in hand {
                        if local.chance(0.5) {
                            do { try frozen[i].start() } catch {
                                ctx.violation("wrong-error", "start() by hand of block op \(i) threw \(error)")
                            }
                        } else if !SpindleOperation.perform(frozen[i]) {
                            ctx.violation("wrong-error", "perform(block op \(i)) refused a ready operation")
                        }
                    }
                case 2:
                    for i in 0..<n where racingF[i] {
                        for _ in 0..<local.int(1...4) {
                            let slot = talliesF[i].reserve(1)
                            var accepted = true
                            do { try frozen[i].addExecutionBlock(talliesF[i].block(slot)) } catch {
                                accepted = false
                                if case .blockOperationStarted? = error as? SpindleError {} else {
                                    ctx.violation("wrong-error", "racing addExecutionBlock threw \(error)")
                                }
                            }
                            raced.withLockedValue { $0.append((i, slot, accepted)) }
                        }
                    }
                default:
                    for _ in 0..<local.int(0...3) {
                        frozen[local.int(0..<n)].cancel()
                        if local.chance(0.5) { sleepMicros(local.int(1...200)) }
                    }
                }
            }
            guard ctx.drain(queues, timeout: .seconds(30)) else { break }
            // Operations started by hand finished before their start() returned; perform() too (synchronous).
            let racedList = raced.withLockedValue { $0 }
            for (i, op) in frozen.enumerated() {
                let tally = tallies[i]
                if !op.isFinished { ctx.violation("not-finished", "op \(i): \(op)") }
                let c = tally.completions.load(ordering: .relaxed)
                if c != 1 { ctx.violation("completion-not-once", "op \(i) completion ran \(c) times") }
                if observed[i] {
                    let fe = tally.finishEvents.load(ordering: .relaxed)
                    if fe != 1 { ctx.violation("finish-not-once", "op \(i): \(fe) did-isFinished events") }
                }
                let counts = tally.counts.withLockedValue { $0 }
                let rejected = Set(racedList.filter { $0.op == i && !$0.accepted }.map(\.slot))
                var ran = 0
                var expected = 0
                for (slot, k) in counts.enumerated() {
                    if rejected.contains(slot) {
                        if k != 0 { ctx.violation("rejected-block-ran", "op \(i) block \(slot) ran \(k) times") }
                        continue
                    }
                    expected += 1
                    if k > 1 { ctx.violation("block-not-once", "op \(i) block \(slot) ran \(k) times") }
                    if k > 0 { ran += 1 }
                }
                blocksRun.add(ran, ordering: .relaxed)
                if preCancelled[i] {
                    if ran != 0 { ctx.violation("block-after-precancel", "op \(i): \(ran) of \(expected) blocks ran") }
                } else if op.isCancelled {
                    if ran != 0 && ran != expected {
                        ctx.violation("blocks-partial", "cancelled op \(i): \(ran) of \(expected) blocks ran")
                    }
                } else if ran != expected {
                    let acceptedRacers = racedList.filter { $0.op == i && $0.accepted }.map(\.slot)
                    let lostRacer = acceptedRacers.contains { counts[$0] == 0 }
                    ctx.violation(lostRacer ? "accepted-block-lost" : "block-not-once",
                                  "op \(i): \(ran) of \(expected) blocks ran (not cancelled)")
                }
            }
            racingAccepted += racedList.filter(\.accepted).count
            racingRejected += racedList.filter { !$0.accepted }.count
        }
        ctx.drain(queues)
        ctx.figure("rounds", "\(rounds)")
        ctx.figure("blocks-run", "\(blocksRun.load(ordering: .relaxed))")
        ctx.figure("max-blocks", "\(maxBlocks)")
        ctx.figure("racing-adds", "\(racingAccepted) accepted/\(racingRejected) rejected")
    }
}
