import Spindle
import Synchronization

// `misuse`: every bad call must throw the documented SpindleError case and leave everything as it was
// (contract Part 1, items 1–3). Checked, round after round: self-dependency; cycles of length 1–10; start()
// while not ready, while executing, while enqueued, after finishing (a no-op); adding finished, executing and
// already-queued operations (also via all-or-nothing batches and duplicate batches); negative widths in init and
// setMaxConcurrentOperationCount; NaN deadlines; negative semaphore values; finish() misuse on concurrent
// operations; waiting on yourself and on your own queue; addExecutionBlock after start; thread join misuse (a
// join cycle of two threads too).
// Figures: "unreported-misuse" (the call succeeded), "wrong-error", "state-changed".

/// Unnamed on purpose: rejecting an unnamed operation builds its default name while the operation's lock is held
/// (an earlier claim() read `displayName` there and trapped with "Recursive call to lock Mutex").
final class CountingOp: SpindleOperation, @unchecked Sendable {
    let live = LiveToken()
    let runs = Atomic<Int>(0)
    override func main() throws { self.runs.add(1, ordering: .relaxed) }
}

final class PlainConcurrentOp: SpindleConcurrentOperation, @unchecked Sendable {
    let live = LiveToken()
    override func main() throws { try self.finish() }
}

final class SelfWaitOp: SpindleOperation, @unchecked Sendable {
    let live = LiveToken()
    let ctx: ScenarioContext
    init(ctx: ScenarioContext) { self.ctx = ctx; super.init() }
    override func main() throws {
        MisuseScenario.expect(ctx, "waitUntilFinished from own main", { if case .waitOnSelf = $0 { true } else { false } }) {
            _ = try self.waitUntilFinished(timeout: .seconds(1))
        }
        MisuseScenario.expect(ctx, "waitUntilAllOperationsAreFinished from own queue",
                              { if case .waitOnOwnQueue = $0 { true } else { false } }) {
            guard let q = SpindleOperationQueue.current else { throw Boom() }
            _ = try q.waitUntilAllOperationsAreFinished(timeout: .seconds(1))
        }
    }
}

enum MisuseScenario {
    static let invariants = ["unreported-misuse", "wrong-error", "state-changed", "graph-broken", "timeout-hang",
                             "timeout-wrong-result", "timeout-slow", "drain-timeout", "join-cycle-hang"]

    /// Runs `body`, which must throw a SpindleError matching `matches`, and then checks `unchanged`.
    static func expect(_ ctx: ScenarioContext, _ what: String, _ matches: (SpindleError) -> Bool,
                       unchanged: () -> Bool = { true }, _ body: () throws -> Void) {
        ctx.count()
        do {
            try body()
            ctx.violation("unreported-misuse", "\(what) did not throw")
        } catch let e as SpindleError {
            if !matches(e) { ctx.violation("wrong-error", "\(what) threw \(e)") }
        } catch {
            ctx.violation("wrong-error", "\(what) threw a non-Spindle error: \(error)")
        }
        if !unchanged() { ctx.violation("state-changed", "\(what) changed state") }
    }

    static func run(_ ctx: ScenarioContext) {
        var rng = SplitMix64.derive(ctx.seed, 8)
        let q = ctx.makeQueue("misuse-q", width: 2)
        let other = ctx.makeQueue("misuse-other", width: 2)
        let held = ctx.makeQueue("misuse-suspended", width: 2)
        var rounds = 0
        var timeoutPasses = 0
        var nextTimeouts: UInt64 = 0
        while ctx.running {
            rounds += 1
            // Bad timeouts for every timed wait (ScenarioMisuseTimeouts.swift): about a quarter of the time.
            if nowNs() >= nextTimeouts {
                let t0 = nowNs()
                badTimeouts(ctx, &rng)
                timeoutPasses += 1
                let spent = nowNs() - t0
                nextTimeouts = nowNs() + max(400_000_000, 3 * spent)
            }
            held.isSuspended = true
            // Self-dependency.
            let a = CountingOp()
            expect(ctx, "addDependency(self)", { if case .selfDependency = $0 { true } else { false } },
                   unchanged: { a.dependencies.isEmpty && a.isReady }) { try a.addDependency(a) }
            // A chain o0 <- o1 <- … <- oL, then o0.addDependency(oL) closes a cycle.
            let length = rng.int(1...10)
            let chain = (0...length).map { _ in CountingOp() }
            for i in 1...length { try! chain[i].addDependency(chain[i - 1]) }
            expect(ctx, "cycle of length \(length + 1)", {
                if case .dependencyCycle(let names) = $0 { names.count >= 2 } else { false }
            }, unchanged: { chain[0].dependencies.isEmpty && chain[0].isReady }) {
                try chain[0].addDependency(chain[length])
            }
            // start() while not ready (chain[1] waits on chain[0]).
            expect(ctx, "start() while not ready", { if case .operationNotReady = $0 { true } else { false } },
                   unchanged: { !chain[1].isExecuting && !chain[1].isFinished && !chain[1].isReady }) {
                try chain[1].start()
            }
            try! q.addOperations(chain.shuffled(using: &rng))  // the graph must still run to completion
            // Finished operations: adding fails; start() again does nothing.
            let f = CountingOp()
            try! f.start()
            let before = q.operationCount
            expect(ctx, "addOperation(finished)", { if case .operationFinished = $0 { true } else { false } },
                   unchanged: { f.isFinished && f.runs.load(ordering: .relaxed) == 1 }) { try q.addOperation(f) }
            let fresh = CountingOp()
            expect(ctx, "addOperations([fresh, finished])", { if case .operationFinished = $0 { true } else { false } },
                   unchanged: { !fresh.isFinished && !fresh.isExecuting }) { try held.addOperations([fresh, f]) }
            ctx.count()
            do { try f.start() } catch { ctx.violation("wrong-error", "start() on a finished op threw \(error)") }
            if f.runs.load(ordering: .relaxed) != 1 { ctx.violation("state-changed", "start() on a finished op ran main again") }
            _ = before
            // Already in a queue (held one is suspended, so they stay queued).
            let b = CountingOp()
            try! held.addOperation(b)
            let heldCount = held.operationCount
            expect(ctx, "addOperation twice", { if case .operationAlreadyInQueue = $0 { true } else { false } },
                   unchanged: { held.operationCount == heldCount }) { try held.addOperation(b) }
            expect(ctx, "addOperation to a second queue", { if case .operationAlreadyInQueue = $0 { true } else { false } },
                   unchanged: { held.operationCount == heldCount && other.operationCount == 0 }) { try other.addOperation(b) }
            expect(ctx, "start() on an enqueued op", { if case .operationEnqueued = $0 { true } else { false } },
                   unchanged: { !b.isExecuting && !b.isFinished && b.runs.load(ordering: .relaxed) == 0 }) { try b.start() }
            expect(ctx, "addOperations([fresh, queued])", { if case .operationAlreadyInQueue = $0 { true } else { false } },
                   unchanged: { held.operationCount == heldCount }) { try held.addOperations([fresh, b]) }
            let d = CountingOp()
            expect(ctx, "addOperations([d, fresh, d])", { if case .duplicateInBatch = $0 { true } else { false } },
                   unchanged: { held.operationCount == heldCount }) { try held.addOperations([d, fresh, d]) }
            // All-or-nothing: the rejected batches left fresh and d addable.
            do { try held.addOperations([fresh, d]) } catch {
                ctx.violation("state-changed", "a rejected batch left its operations unaddable: \(error)")
            }
            // Executing: started by hand on a helper thread, blocked in main.
            let e = GateOp()
            let starter = spawnRetrying(name: "misuse-start") { try? e.start() }!
            let deadline = SpindleDeadline.after(.seconds(5))
            while !e.isExecuting && !deadline.hasPassed { sleepMicros(20) }
            expect(ctx, "addOperation(executing)", { if case .operationExecuting = $0 { true } else { false } },
                   unchanged: { e.isExecuting }) { try q.addOperation(e) }
            expect(ctx, "start() while executing", { if case .operationExecuting = $0 { true } else { false } },
                   unchanged: { e.isExecuting }) { try e.start() }
            e.gate.signal()
            try? starter.join()
            // Widths.
            for bad in [-2, -5, Int.min] {
                expect(ctx, "init(maxConcurrentOperationCount: \(bad))", {
                    if case .invalidConcurrencyLimit(let v) = $0 { v == bad } else { false }
                }) { _ = try SpindleOperationQueue(name: "bad", maxConcurrentOperationCount: bad) }
                expect(ctx, "setMaxConcurrentOperationCount(\(bad))", {
                    if case .invalidConcurrencyLimit(let v) = $0 { v == bad } else { false }
                }, unchanged: { q.maxConcurrentOperationCount == 2 }) { try q.setMaxConcurrentOperationCount(bad) }
            }
            // Numbers.
            expect(ctx, "SpindleDeadline.after(seconds: .nan)", { if case .invalidTimeout = $0 { true } else { false } }) {
                _ = try SpindleDeadline.after(seconds: .nan)
            }
            expect(ctx, "SpindleSemaphore(value: -1)", {
                if case .negativeSemaphoreValue(let v) = $0 { v == -1 } else { false }
            }) { _ = try SpindleSemaphore(value: -1) }
            // finish() misuse on a concurrent operation.
            let c = PlainConcurrentOp()
            expect(ctx, "finish() before start", { if case .operationNotExecuting = $0 { true } else { false } },
                   unchanged: { !c.isFinished && !c.isExecuting }) { try c.finish() }
            c.cancel()
            do { try c.finish() } catch { ctx.violation("wrong-error", "finish() of a cancelled unstarted op threw \(error)") }
            expect(ctx, "finish() twice", { if case .operationAlreadyFinished = $0 { true } else { false } },
                   unchanged: { c.isFinished }) { try c.finish() }
            // Waiting on yourself (checked inside main, on a queue).
            try! q.addOperation(SelfWaitOp(ctx: ctx))
            // addExecutionBlock after start.
            let blocks = StressBlockOp {}
            try! blocks.start()
            expect(ctx, "addExecutionBlock after start", { if case .blockOperationStarted = $0 { true } else { false } },
                   unchanged: { blocks.executionBlocks.count == 1 }) { try blocks.addExecutionBlock {} }
            // Thread join misuse.
            let t = try! spawnRetryingOrThrow(name: "misuse-join") {
                expect(ctx, "join() on itself", { if case .joinSelf = $0 { true } else { false } }) {
                    try SpindleThread.current.join()
                }
            }
            try! t.join()
            expect(ctx, "join() twice", { if case .threadAlreadyJoined = $0 { true } else { false } }) { try t.join() }
            let detached = spawnRetrying(name: "misuse-det", joinable: false) {}!
            expect(ctx, "join() on a detached thread", { if case .threadNotJoinable = $0 { true } else { false } }) {
                try detached.join()
            }
            joinCycle(ctx)
            // Let everything run; the rejected cycle must not have broken the chain.
            held.isSuspended = false
            guard ctx.drain([q, other, held]) else { break }
            for (i, op) in chain.enumerated() where !op.isFinished || op.runs.load(ordering: .relaxed) != 1 {
                ctx.violation("graph-broken", "chain op \(i) of \(length + 1): \(op), ran \(op.runs.load(ordering: .relaxed))")
            }
            if b.runs.load(ordering: .relaxed) != 1 || fresh.runs.load(ordering: .relaxed) != 1 {
                ctx.violation("state-changed", "queued ops after misuse ran \(b.runs.load(ordering: .relaxed)) / "
                    + "\(fresh.runs.load(ordering: .relaxed)) times")
            }
        }
        held.isSuspended = false
        ctx.drain([q, other, held])
        ctx.figure("rounds", "\(rounds)")
        ctx.figure("bad-timeout-passes", "\(timeoutPasses) x \(timeoutInputs.count) timeouts x \(waitNames.count) waits")
    }
}

/// Two threads join each other at once: exactly one join is refused with `joinCycle` (the one that would close the
/// cycle), the other returns once the refused thread has ended; nothing hangs.
private func joinCycle(_ ctx: ScenarioContext) {
    let pair = SpindleLockedValue<[SpindleThread]>([])
    let go = try! SpindleSemaphore(value: 0)  // 0 is a valid value
    let done = try! SpindleSemaphore(value: 0)
    let refused = Atomic<Int>(0)
    func ring(_ index: Int) -> @Sendable () -> Void {
        { @Sendable in
            go.wait()
            guard let other = pair.withLockedValue({ $0.count == 2 ? $0[1 - index] : nil }) else { return }
            do throws(SpindleError) {
                try other.join()
            } catch {
                if case .joinCycle = error { refused.add(1, ordering: .relaxed) } else {
                    ctx.violation("wrong-error", "a join cycle threw \(error)")
                }
            }
            done.signal()
        }
    }
    guard let a = try? spawnRetryingOrThrow(name: "misuse-ring-0", ring(0)) else { return }
    guard let b = try? spawnRetryingOrThrow(name: "misuse-ring-1", ring(1)) else {
        go.signal()  // `a` finds no partner and returns
        _ = try? a.join()
        return
    }
    pair.withLockedValue { $0 = [a, b] }
    go.signal()
    go.signal()
    for _ in 0..<2 where !done.wait(timeout: .seconds(10)) {
        ctx.violation("join-cycle-hang", "two threads joining each other did not both return within 10 s")
        return
    }
    if refused.load(ordering: .relaxed) != 1 {
        ctx.violation("unreported-misuse", "\(refused.load(ordering: .relaxed)) of the two crossed joins were refused")
    }
    _ = try? a.join()  // the one the refused join did not claim; the other throws threadAlreadyJoined
    _ = try? b.join()
}

