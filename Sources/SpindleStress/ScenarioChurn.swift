import Spindle
import Synchronization

// `churn`: queues created and destroyed in a loop with work in them: some drained before release, some
// released with work pending (the contract: they finish it, then free themselves), some fed from a second
// queue's operations, with block operations of several blocks (helper threads), concurrent operations and
// barriers. Invariants: every operation's completion runs; every released queue is freed (weak reference nil)
// within a few seconds; the thread count (/proc/self/task) and descriptor count (/proc/self/fd) return to their
// baseline within a few seconds.

final class WeakQueueRef: @unchecked Sendable {
    weak var queue: SpindleOperationQueue?
    init(_ q: SpindleOperationQueue) { self.queue = q }
}

final class ChurnConcurrentOp: SpindleConcurrentOperation, @unchecked Sendable {
    let live = LiveToken()
    let delayUs: Int
    init(delayUs: Int) { self.delayUs = delayUs; super.init() }
    override func main() throws {
        let d = self.delayUs
        if (try? SpindleThread.detach(name: "churn-fin", { [self] in sleepMicros(d); try? self.finish() })) == nil {
            try self.finish()
        }
    }
}

enum ChurnScenario {
    static let invariants = ["completion-missing", "queue-not-freed", "thread-leak", "fd-leak", "drain-timeout"]

    /// Waits up to `seconds` for `read()` to come back to `baseline` (or below); returns the last value.
    static func settle(_ read: () -> Int, to baseline: Int, seconds: Double) -> Int {
        let deadline = nowNs() + UInt64(seconds * 1e9)
        var v = read()
        while v > baseline && nowNs() < deadline {
            sleepMicros(20_000)
            v = read()
        }
        return v
    }

    static func run(_ ctx: ScenarioContext) {
        var rng = SplitMix64.derive(ctx.seed, 9)
        // Baseline: let earlier scenarios' detached threads exit first.
        var lastCount = -1
        for _ in 0..<20 where threadCount() != lastCount {
            lastCount = threadCount()
            sleepMicros(50_000)
        }
        let baseThreads = threadCount()
        let baseFds = fdCount()
        let completions = Atomic<Int>(0)
        var expected = 0
        var released: [WeakQueueRef] = []
        var created = 0
        var peakThreads = baseThreads
        // Work for the scenario's time minus a short settling allowance (at least half of it).
        let allowance = UInt64(min(1.5, ctx.config.duration / 3) * 1e9)
        let workEnd = max(nowNs() + UInt64(ctx.config.duration * 0.5e9), ctx.endNs > allowance ? ctx.endNs - allowance : 0)
        while nowNs() < workEnd && ctx.running {
            // A few queues alive at once.
            var live: [SpindleOperationQueue] = []
            for _ in 0..<rng.int(1...4) {
                let q = ctx.makeQueue("churn-\(created)", width: [1, 2, 3, 4, -1][rng.int(0..<5)])
                created += 1
                live.append(q)
                let n = rng.int(5...60)
                var previous: SpindleOperation? = nil
                for i in 0..<n {
                    let op: SpindleOperation
                    switch rng.int(0..<10) {
                    case 0: op = ChurnConcurrentOp(delayUs: rng.int(0...500))
                    case 1:
                        let block = StressBlockOp { spin(ns: 2000) }
                        for _ in 0..<rng.int(1...3) { try! block.addExecutionBlock { spin(ns: 2000) } }
                        op = block
                    default:
                        let work = UInt64(rng.int(0...20_000))
                        op = StressBlockOp { spin(ns: work) }
                    }
                    op.completionBlock = {
                        completions.add(1, ordering: .relaxed)
                        ctx.count()
                    }
                    if let previous, rng.chance(0.2) { try! op.addDependency(previous) }
                    if i % 16 == 15 { q.addBarrierBlock {} }
                    try! q.addOperation(op)
                    expected += 1
                    previous = op
                }
                if rng.chance(0.2) { q.cancelAllOperations() }
            }
            peakThreads = max(peakThreads, threadCount())
            // Release them: some drained first, some with work pending.
            for q in live {
                if rng.chance(0.5) { ctx.drain([q]) }
                released.append(WeakQueueRef(q))
            }
            live.removeAll()
            if released.count > 256 {
                // Keep the list short: forget the ones already freed.
                released.removeAll { $0.queue == nil }
            }
        }
        // Everything released must drain and free itself.
        let freeDeadline = SpindleDeadline.after(.seconds(5))
        while released.contains(where: { $0.queue != nil }) && !freeDeadline.hasPassed { sleepMicros(10_000) }
        let alive = released.filter { $0.queue != nil }.count
        if alive > 0 { ctx.violation("queue-not-freed", "\(alive) released queue(s) still alive after 5 s", count: alive) }
        let cDeadline = SpindleDeadline.after(.seconds(5))
        while completions.load(ordering: .acquiring) < expected && !cDeadline.hasPassed { sleepMicros(10_000) }
        let got = completions.load(ordering: .acquiring)
        if got != expected {
            ctx.violation("completion-missing", "\(expected) ops added, \(got) completions", count: abs(expected - got))
        }
        let endThreads = settle(threadCount, to: baseThreads, seconds: 5)
        let endFds = settle(fdCount, to: baseFds, seconds: 5)
        if endThreads > baseThreads {
            ctx.violation("thread-leak", "threads \(baseThreads) -> \(endThreads) after 5 s", count: endThreads - baseThreads)
        }
        if endFds > baseFds { ctx.violation("fd-leak", "fds \(baseFds) -> \(endFds) after 5 s", count: endFds - baseFds) }
        ctx.figure("queues", "\(created)")
        ctx.figure("threads", "\(baseThreads)->\(peakThreads)->\(endThreads)")
        ctx.figure("fds", "\(baseFds)->\(endFds)")
    }
}
