import Spindle
import Synchronization

// `selfwait`: waiting on yourself is detected (contract Part 1, item 3), and waiting on others from inside an
// operation still works. Probes run on queues of widths 1, 2 and ncpu, or are started by hand:
// - main calls waitUntilFinished on its own operation (untimed, with a timeout, with a deadline): waitOnSelf;
// - main calls waitUntilAllOperationsAreFinished on its own queue (SpindleOperationQueue.current), also from an
//   operation started by hand inside that main (same worker thread): waitOnOwnQueue;
// - a completion block waits for its own operation: waitOnSelf; a completion block running on the queue's worker
//   waits for that queue: waitOnOwnQueue; a concurrent operation's completion block on the thread that called
//   finish() (a detached one) waits for its own operation (waitOnSelf) and for its queue (no worker context:
//   the wait can never succeed, since the queue drains only after the completion returns; it must throw);
// - cross-checks that must succeed: waiting (from main) on an operation of another queue, on that other queue
//   draining, on an operation started by hand on another thread, on a finished operation, and
//   addOperations(_:waitUntilFinished: true) into the other queue.
// Invariants: "unreported-self-wait" (a self-wait returned false after its timeout instead of throwing),
// "wrong-error", "self-wait-hang" (a probe did not finish within the bound: drained queues and probe threads are
// bounded), "cross-wait-failed" (a legitimate wait threw or timed out, or returned before its target finished).

final class SelfWaitProbe: SpindleOperation, @unchecked Sendable {
    enum Mode: Int, CaseIterable {
        case waitSelf, waitOwnQueue, nestedOwnQueue, completionSelf, completionOwnQueue
        case waitOther, waitOtherQueue, waitHandStarted, waitFinished, addAndWait
    }
    let live = LiveToken()
    let ctx: ScenarioContext
    let mode: Mode
    let variant: Int  // 0 untimed, 1 timeout, 2 deadline
    let other: SpindleOperationQueue
    let ran = Atomic<Int>(0)

    init(ctx: ScenarioContext, mode: Mode, variant: Int, other: SpindleOperationQueue) {
        self.ctx = ctx
        self.mode = mode
        self.variant = variant
        self.other = other
        super.init()
    }

    /// The self-wait timeout: a library that failed to detect the misuse returns false after it.
    static let probeTimeout: Duration = .milliseconds(300)

    static func waitSelf(_ op: SpindleOperation, _ variant: Int) throws(SpindleError) -> Bool {
        switch variant {
        case 0: try op.waitUntilFinished(); return true
        case 1: return try op.waitUntilFinished(timeout: probeTimeout)
        default: return try op.waitUntilFinished(until: .after(probeTimeout))
        }
    }

    static func waitQueue(_ q: SpindleOperationQueue, _ variant: Int) throws(SpindleError) -> Bool {
        switch variant {
        case 0: try q.waitUntilAllOperationsAreFinished(); return true
        case 1: return try q.waitUntilAllOperationsAreFinished(timeout: probeTimeout)
        default: return try q.waitUntilAllOperationsAreFinished(until: .after(probeTimeout))
        }
    }

    /// `body` must throw the error `matches` accepts.
    static func expectMisuse(_ ctx: ScenarioContext, _ what: String, _ matches: (SpindleError) -> Bool,
                             _ body: () throws(SpindleError) -> Bool) {
        do {
            let r = try body()
            ctx.violation("unreported-self-wait", "\(what) returned \(r) instead of throwing")
        } catch {
            if !matches(error) { ctx.violation("wrong-error", "\(what) threw \(error)") }
        }
    }

    static func isWaitOnSelf(_ e: SpindleError) -> Bool { if case .waitOnSelf = e { true } else { false } }
    static func isWaitOnOwnQueue(_ e: SpindleError) -> Bool { if case .waitOnOwnQueue = e { true } else { false } }

    func crossWait(_ what: String, _ body: () throws(SpindleError) -> Bool, finished: () -> Bool) {
        do {
            if !(try body()) { ctx.violation("cross-wait-failed", "\(what) timed out") }
            else if !finished() { ctx.violation("cross-wait-failed", "\(what) returned before its target finished") }
        } catch {
            ctx.violation("cross-wait-failed", "\(what) threw \(error)")
        }
    }

    override func main() throws {
        self.ran.add(1, ordering: .relaxed)
        let v = self.variant
        switch self.mode {
        case .waitSelf:
            Self.expectMisuse(ctx, "waitUntilFinished on itself (variant \(v))", Self.isWaitOnSelf) {
                () throws(SpindleError) -> Bool in try Self.waitSelf(self, v)
            }
        case .waitOwnQueue:
            guard let q = SpindleOperationQueue.current else {
                ctx.violation("wrong-error", "SpindleOperationQueue.current is nil in a queued operation")
                return
            }
            Self.expectMisuse(ctx, "waitUntilAllOperationsAreFinished on its own queue (variant \(v))",
                              Self.isWaitOnOwnQueue) { () throws(SpindleError) -> Bool in try Self.waitQueue(q, v) }
        case .nestedOwnQueue:
            guard let q = SpindleOperationQueue.current else { return }
            let inner = StressBlockOp { [ctx] in
                Self.expectMisuse(ctx, "waitUntilAllOperationsAreFinished on the queue, from an op started by hand in "
                    + "one of its ops", Self.isWaitOnOwnQueue) { () throws(SpindleError) -> Bool in try Self.waitQueue(q, v) }
            }
            try inner.start()
        case .completionSelf, .completionOwnQueue:
            break  // the completion block probes
        case .waitOther:
            let target = StressBlockOp { spin(ns: 20_000) }
            try! self.other.addOperation(target)
            crossWait("waitUntilFinished on an op of another queue", { () throws(SpindleError) -> Bool in
                try target.waitUntilFinished(timeout: .seconds(10))
            }, finished: { target.isFinished })
        case .waitOtherQueue:
            let target = StressBlockOp { spin(ns: 20_000) }
            try! self.other.addOperation(target)
            crossWait("waitUntilAllOperationsAreFinished on another queue", { () throws(SpindleError) -> Bool in
                try self.other.waitUntilAllOperationsAreFinished(timeout: .seconds(10))
            }, finished: { target.isFinished })
        case .waitHandStarted:
            let target = StressBlockOp { spin(ns: 20_000) }
            let starter = try spawnRetryingOrThrow(name: "selfwait-hand") {
                sleepMicros(50)
                try? target.start()
            }
            crossWait("waitUntilFinished on an op started by hand on another thread", { () throws(SpindleError) -> Bool in
                try target.waitUntilFinished(timeout: .seconds(10))
            }, finished: { target.isFinished })
            try? starter.join()
        case .waitFinished:
            let target = StressBlockOp {}
            try target.start()
            crossWait("waitUntilFinished on a finished op", { () throws(SpindleError) -> Bool in
                try target.waitUntilFinished(timeout: .zero)
            }, finished: { target.isFinished })
        case .addAndWait:
            let a = StressBlockOp { spin(ns: 10_000) }, b = StressBlockOp { spin(ns: 10_000) }
            crossWait("addOperations(_:waitUntilFinished: true) into another queue", { () throws(SpindleError) -> Bool in
                try self.other.addOperations([a, b], waitUntilFinished: true)
                return true
            }, finished: { a.isFinished && b.isFinished })
        }
    }

    /// Installs the completion probe for the completion modes (and a plain counter otherwise).
    func installCompletion(queue: SpindleOperationQueue?, done: AtomicCounter) {
        let mode = self.mode, v = self.variant, ctx = self.ctx
        self.completionBlock = { [unowned self] in
            if mode == .completionSelf {
                Self.expectMisuse(ctx, "completion block waiting for its own op (variant \(v))", Self.isWaitOnSelf) {
                    () throws(SpindleError) -> Bool in try Self.waitSelf(self, v)
                }
            } else if mode == .completionOwnQueue, let queue {
                Self.expectMisuse(ctx, "completion block (on the worker) waiting for its op's queue (variant \(v))",
                                  Self.isWaitOnOwnQueue) { () throws(SpindleError) -> Bool in try Self.waitQueue(queue, v) }
            }
            done.n.add(1, ordering: .relaxed)
            ctx.count()
        }
    }
}

/// A concurrent operation finished from a detached thread (or from main); its completion block runs on the
/// finishing thread and probes waiting for its own operation and for its queue.
final class SelfWaitAsyncProbe: SpindleConcurrentOperation, @unchecked Sendable {
    let live = LiveToken()
    let ctx: ScenarioContext
    let onDetached: Bool
    let probeQueue: Bool
    let variant: Int

    init(ctx: ScenarioContext, onDetached: Bool, probeQueue: Bool, variant: Int) {
        self.ctx = ctx
        self.onDetached = onDetached
        self.probeQueue = probeQueue
        self.variant = variant
        super.init()
    }

    override func main() throws {
        guard self.onDetached else { return try self.finish() }
        if (try? SpindleThread.detach(name: "selfwait-fin", { [self] in try? self.finish() })) == nil { try self.finish() }
    }

    func installCompletion(queue: SpindleOperationQueue, done: AtomicCounter) {
        let v = self.variant, ctx = self.ctx, probeQueue = self.probeQueue, where_ = self.onDetached ? "detached" : "worker"
        self.completionBlock = { [unowned self] in
            if probeQueue {
                SelfWaitProbe.expectMisuse(ctx, "completion block of a concurrent op (finished on a \(where_) thread) "
                    + "waiting for its queue (variant \(v))", SelfWaitProbe.isWaitOnOwnQueue) {
                    () throws(SpindleError) -> Bool in try SelfWaitProbe.waitQueue(queue, v)
                }
            } else {
                SelfWaitProbe.expectMisuse(ctx, "completion block of a concurrent op (finished on a \(where_) thread) "
                    + "waiting for itself (variant \(v))", SelfWaitProbe.isWaitOnSelf) {
                    () throws(SpindleError) -> Bool in try SelfWaitProbe.waitSelf(self, v)
                }
            }
            done.n.add(1, ordering: .relaxed)
            ctx.count()
        }
    }
}

enum SelfWaitScenario {
    static let invariants = ["unreported-self-wait", "wrong-error", "self-wait-hang", "cross-wait-failed",
                             "completion-missing", "drain-timeout", "thread-stuck"]

    static func run(_ ctx: ScenarioContext) {
        var rng = SplitMix64.derive(ctx.seed, 21)
        let queues = [ctx.makeQueue("selfwait-serial", width: 1), ctx.makeQueue("selfwait-w2", width: 2),
                      ctx.makeQueue("selfwait-ncpu", width: ctx.config.ncpu)]
        let other = ctx.makeQueue("selfwait-other", width: 2)
        let done = AtomicCounter()
        var expected = 0
        var rounds = 0
        var hung = false
        var perMode = [Int](repeating: 0, count: SelfWaitProbe.Mode.allCases.count + 1)
        // Untimed variants hang for good if detection fails: a quarter of the probes use them.
        func variant(_ rng: inout SplitMix64) -> Int { rng.chance(0.25) ? 0 : rng.int(1...2) }
        while ctx.running {
            rounds += 1
            var hand: [SelfWaitProbe] = []
            for _ in 0..<rng.int(10...40) {
                let modes = SelfWaitProbe.Mode.allCases
                let mode = modes[rng.int(0..<modes.count)]
                let v = variant(&rng)
                let probe = SelfWaitProbe(ctx: ctx, mode: mode, variant: v, other: other)
                let queued = !(mode == .waitOwnQueue || mode == .nestedOwnQueue || mode == .completionOwnQueue)
                    ? rng.chance(0.7) : true
                let q = queues[rng.int(0..<queues.count)]
                probe.installCompletion(queue: queued ? q : nil, done: done)
                expected += 1
                perMode[mode.rawValue] += 1
                if queued { try! q.addOperation(probe) } else { hand.append(probe) }
            }
            for _ in 0..<rng.int(0...6) {
                let q = queues[rng.int(0..<queues.count)]
                let probe = SelfWaitAsyncProbe(ctx: ctx, onDetached: rng.chance(0.7), probeQueue: rng.chance(0.5),
                                               variant: rng.int(1...2))
                probe.installCompletion(queue: q, done: done)
                expected += 1
                perMode[perMode.count - 1] += 1
                try! q.addOperation(probe)
            }
            // Probes started by hand, on two helper threads.
            let frozen = hand
            // Bounds well under the watchdog's 20 s, so a hang is counted as a violation, not a stall.
            let ok = runThreads(ctx, 2, name: "selfwait-hand", timeout: .seconds(6)) { t in
                var i = t
                while i < frozen.count {
                    do { try frozen[i].start() } catch { ctx.violation("wrong-error", "start() of a probe threw \(error)") }
                    i += 2
                }
            }
            if !ok {
                ctx.violation("self-wait-hang", "a probe started by hand did not return within 6 s")
                hung = true
                break
            }
            guard ctx.drain(queues + [other], timeout: .seconds(8)) else {
                ctx.violation("self-wait-hang", "a queue with self-waiting probes did not drain within 8 s")
                hung = true
                break
            }
            let dl = SpindleDeadline.after(.seconds(5))
            while done.n.load(ordering: .acquiring) < expected && !dl.hasPassed { sleepMicros(200) }
        }
        ctx.figure("rounds", "\(rounds)")
        ctx.figure("probes", perMode.map(String.init).joined(separator: "/"))
        if hung { return }  // wedged probes stay wedged: the leak is reported by live-objects
        ctx.drain(queues + [other])
        let got = done.n.load(ordering: .acquiring)
        if got != expected { ctx.violation("completion-missing", "\(expected) probes, \(got) completions") }
    }
}
