import Glibc
import Spindle
import Synchronization

// `concurrent`: SpindleConcurrentOperation subclasses whose work ends later on another thread. Modes: finish
// inside main; finish from a detached thread after a delay; two detached threads race to finish (one must get
// operationAlreadyFinished); main throws (the library finishes it with the error); finish from a detached thread
// racing cancel(); cancelled before being added (main never runs).
//
// Invariants: every operation finishes exactly once (exactly one successful finish() for the modes that call it,
// a second finish() afterwards throws operationAlreadyFinished); main runs at most once, and never for one
// cancelled before add; the completion block runs exactly once; a concurrent op holds its slot until it finishes
// (running-at-once high-water mark ≤ width).

struct Boom: Error {}

final class ConcOp: SpindleConcurrentOperation, @unchecked Sendable {
    let live = LiveToken()
    enum Mode: Int, CaseIterable { case inMain, later, race, throwing, raceCancel, preCancelled }
    let ctx: ScenarioContext
    let index: Int
    let mode: Mode
    let delayUs: Int
    let slots: HighWater
    let width: Int
    let runs = Atomic<Int>(0)
    let completions = Atomic<Int>(0)
    let finishSuccesses = Atomic<Int>(0)
    let attemptsDone = Atomic<Int>(0)  // finish() calls that have returned (the queue drains inside finish())
    let inSlot = Atomic<Bool>(false)
    let slotLeft = Atomic<Bool>(false)  // set by whoever took `inSlot` to false, after leaving `slots`

    init(ctx: ScenarioContext, index: Int, mode: Mode, delayUs: Int, slots: HighWater, width: Int) {
        self.ctx = ctx
        self.index = index
        self.mode = mode
        self.delayUs = delayUs
        self.slots = slots
        self.width = width
        super.init()
    }

    /// One finish() attempt: success counted; the only acceptable failure is operationAlreadyFinished.
    func attemptFinish() {
        // Leave the slot count before finishing: once finished, the queue may start the next one. With two racing
        // finishers, the one that lost the exchange waits until the winner has left before it may finish: the
        // winner can be preempted between the two, and the loser's finish() would then free the queue's slot
        // while this operation still counts (a false "width-exceeded").
        if self.inSlot.exchange(false, ordering: .acquiringAndReleasing) {
            self.slots.leave()
            self.slotLeft.store(true, ordering: .releasing)
        } else {
            let limit = SpindleDeadline.after(.seconds(5))
            while !self.slotLeft.load(ordering: .acquiring) {
                if limit.hasPassed {
                    ctx.violation("slot-not-left", "op \(self.index) (\(self.mode)): the winning finisher never left")
                    break
                }
                sched_yield()
            }
        }
        do {
            try self.finish()
            self.finishSuccesses.add(1, ordering: .relaxed)
        } catch .operationAlreadyFinished {
        } catch {
            ctx.violation("wrong-error", "op \(self.index) finish(): \(error)")
        }
        self.attemptsDone.add(1, ordering: .releasing)
    }

    /// finish() calls this mode makes (each from main or a thread main starts).
    var expectedAttempts: Int {
        switch self.mode {
        case .inMain, .later, .raceCancel: return 1
        case .race: return 2
        case .throwing, .preCancelled: return 0
        }
    }

    override func main() throws {
        let n = self.runs.add(1, ordering: .relaxed).newValue
        if n != 1 { ctx.violation("main-not-once", "op \(self.index) main ran \(n) times") }
        if self.mode == .preCancelled { ctx.violation("main-after-precancel", "op \(self.index)") }
        if !self.isExecuting || self.isFinished { ctx.violation("state-in-main", "op \(self.index): \(self)") }
        let now = self.slots.enter()
        self.inSlot.store(true, ordering: .releasing)
        if now > self.width { ctx.violation("width-exceeded", "\(now) concurrent ops running at width \(self.width)") }
        switch self.mode {
        case .inMain, .preCancelled:
            self.attemptFinish()
        case .later, .raceCancel:
            let spawn = try? SpindleThread.detach(name: "conc-fin") { [self] in
                sleepMicros(self.delayUs)
                self.attemptFinish()
            }
            if spawn == nil { self.attemptFinish() }
            if self.mode == .raceCancel { sleepMicros(self.delayUs); self.cancel() }
        case .race:
            for _ in 0..<2 {
                if (try? SpindleThread.detach(name: "conc-race", { [self] in self.attemptFinish() })) == nil {
                    self.attemptFinish()
                }
            }
        case .throwing:
            if self.inSlot.exchange(false, ordering: .acquiringAndReleasing) {
                self.slots.leave()
                self.slotLeft.store(true, ordering: .releasing)
            }
            throw Boom()
        }
    }

    func installCompletion() {
        self.completionBlock = { [unowned self] in
            let n = self.completions.add(1, ordering: .relaxed).newValue
            if n != 1 { self.ctx.violation("completion-not-once", "op \(self.index) completion ran \(n) times") }
            if !self.isFinished { self.ctx.violation("completion-before-finished", "op \(self.index)") }
            self.ctx.count()
        }
    }
}

enum ConcurrentScenario {
    static let invariants = ["finish-not-once", "second-finish-accepted", "wrong-error", "main-not-once",
                             "main-after-precancel", "completion-not-once", "completion-before-finished",
                             "missing-error", "width-exceeded", "slot-not-left", "state-in-main", "not-finished",
                             "drain-timeout"]

    static func run(_ ctx: ScenarioContext) {
        let widths = [4, 16]
        let queues = widths.map { ctx.makeQueue("concurrent-w\($0)", width: $0) }
        let slots = widths.map { _ in HighWater() }
        var rng = SplitMix64.derive(ctx.seed, 6)
        var rounds = 0
        var modeCounts = [Int](repeating: 0, count: ConcOp.Mode.allCases.count)
        var threadStartFailures = 0
        while ctx.running {
            rounds += 1
            let size = min(ctx.opsLeft, rng.int(50...300))
            if size == 0 { break }
            var ops: [ConcOp] = []
            for i in 0..<size {
                let k = rng.int(0..<widths.count)
                let mode = ConcOp.Mode.allCases[rng.int(0..<ConcOp.Mode.allCases.count)]
                modeCounts[mode.rawValue] += 1
                let op = ConcOp(ctx: ctx, index: i, mode: mode, delayUs: rng.int(0...300), slots: slots[k],
                                width: widths[k])
                op.installCompletion()
                if mode == .preCancelled { op.cancel() }
                ops.append(op)
            }
            let queueOf = ops.map { $0.width == widths[0] ? 0 : 1 }
            let frozen = ops
            let adders = max(1, min(ctx.config.threads, 4))
            runThreads(ctx, adders, name: "conc-add") { t in
                var i = t
                while i < frozen.count {
                    try! queues[queueOf[i]].addOperation(frozen[i])
                    i += adders
                }
            }
            guard ctx.drain(queues, timeout: .seconds(30)) else { break }
            // The queue drains from inside the winning finish(): wait (bounded) for every call to return.
            let settle = SpindleDeadline.after(.seconds(5))
            while frozen.contains(where: {
                $0.attemptsDone.load(ordering: .acquiring) < $0.expectedAttempts && !FaultPass.isInjected($0.error)
            })
                && !settle.hasPassed { sleepMicros(200) }
            for op in frozen {
                if !op.isFinished { ctx.violation("not-finished", "op \(op.index) (\(op.mode)): \(op)"); continue }
                let c = op.completions.load(ordering: .relaxed)
                if c != 1 { ctx.violation("completion-not-once", "op \(op.index) completion ran \(c) times") }
                if FaultPass.isInjected(op.error) {
                    // The fault pass: its thread could not start, so it finished with that error, unrun.
                    if op.runs.load(ordering: .relaxed) != 0 { ctx.violation("main-not-once", "op \(op.index) ran") }
                    threadStartFailures += 1
                    continue
                }
                let s = op.finishSuccesses.load(ordering: .relaxed)
                switch op.mode {
                case .inMain, .later, .race, .raceCancel:
                    if s != 1 { ctx.violation("finish-not-once", "op \(op.index) (\(op.mode)): \(s) successful finish()") }
                case .throwing:
                    if s != 0 { ctx.violation("finish-not-once", "op \(op.index) (throwing): \(s) successful finish()") }
                    if !(op.error is Boom) { ctx.violation("missing-error", "op \(op.index): error \(String(describing: op.error))") }
                case .preCancelled:
                    if op.runs.load(ordering: .relaxed) != 0 { ctx.violation("main-after-precancel", "op \(op.index)") }
                }
                do {
                    try op.finish()
                    ctx.violation("second-finish-accepted", "op \(op.index) (\(op.mode)): finish() after finished succeeded")
                } catch .operationAlreadyFinished {
                } catch {
                    ctx.violation("wrong-error", "op \(op.index) second finish(): \(error)")
                }
            }
        }
        ctx.drain(queues)
        ctx.figure("rounds", "\(rounds)")
        if FaultPass.isOn { ctx.figure("thread-start-failed", "\(threadStartFailures)") }
        ctx.figure("peak", zip(widths, slots).map { "w\($0.0)=\($0.1.peak.load(ordering: .relaxed))" }
            .joined(separator: ","))
    }
}
