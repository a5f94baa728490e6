import Spindle
import Synchronization

// `retry`: retry operations on a serial and a 3-wide queue, each with a random plan (the attempt that succeeds, or
// none; 1-4 attempts; no backoff or up to 300 µs), some cancelled from another thread at a random moment, some
// with a deadline. Invariants:
// - `attempts`: a retry not cancelled made exactly min(success attempt, maxAttempts) attempts;
// - `outcome`: not cancelled: no error and the succeeding attempt's result after a success; else the last
//   attempt's error, with every attempt's error in order; cancelled: no attempt after the last one it made;
// - `ran-after-cancel`: no attempt's `main` began after `cancel()` returned, unless cancel() cancelled that attempt
//   (it was the running one; `main` checks `isCancelled` then);
// - `not-finished`: every retry finished (the queues drained).

struct RetryFailure: Error, Equatable { let attempt: Int }

/// One retry and what the scenario decided for it.
final class RetryPlan: @unchecked Sendable {
    let succeedsOn: Int  // 0: never
    let maxAttempts: Int
    let cancelReturned = Atomic<Bool>(false)
    let lateRuns = Atomic<Int>(0)
    var retry: SpindleRetryOperation! = nil  // set once, before the retry is added

    init(succeedsOn: Int, maxAttempts: Int) {
        self.succeedsOn = succeedsOn
        self.maxAttempts = maxAttempts
    }

    /// Attempt `n`: fails unless `n` is the chosen one.
    func attempt(_ n: Int, work: UInt64) -> SpindleOperation { RetryAttempt(plan: self, attempt: n, work: work) }
}

/// One attempt. A `main` that begins after the retry's `cancel()` returned must belong to an attempt that cancel()
/// cancelled (it was running or about to start, and gets `isCancelled` to stop on); one that was not cancelled began
/// although the retry had stopped: `ran-after-cancel`.
final class RetryAttempt: SpindleOperation, @unchecked Sendable {
    let plan: RetryPlan
    let attempt: Int
    let work: UInt64

    init(plan: RetryPlan, attempt: Int, work: UInt64) {
        self.plan = plan
        self.attempt = attempt
        self.work = work
    }

    override func main() throws {
        if self.plan.cancelReturned.load(ordering: .acquiring) && !self.isCancelled {
            self.plan.lateRuns.add(1, ordering: .relaxed)
        }
        spin(ns: self.work)
        if self.attempt != self.plan.succeedsOn { throw RetryFailure(attempt: self.attempt) }
    }
}

enum RetryScenario {
    static let invariants = ["attempts", "outcome", "ran-after-cancel", "not-finished"]

    static func run(_ ctx: ScenarioContext) {
        var rng = SplitMix64.derive(ctx.seed, 19)
        let queues = [ctx.makeQueue("retry-serial", width: 1), ctx.makeQueue("retry-3", width: 3)]
        var rounds = 0
        while ctx.running {
            var plans: [(RetryPlan, cancel: Bool)] = []
            for _ in 0..<32 {
                let maxAttempts = rng.int(1...4)
                let plan = RetryPlan(succeedsOn: rng.int(0...(maxAttempts + 1)), maxAttempts: maxAttempts)
                let backoff: SpindleRetryOperation.Backoff =
                    rng.int(0...1) == 0 ? .immediately : .constant(.microseconds(rng.int(1...300)))
                let work = UInt64(rng.int(0...20_000))
                plan.retry = try! SpindleRetryOperation(maxAttempts: maxAttempts, backoff: backoff) { [plan] n in
                    plan.attempt(n, work: work)
                }
                if rng.int(0...9) == 0 { plan.retry.cancel(after: .microseconds(rng.int(1...500))) }
                plans.append((plan, cancel: rng.int(0...3) == 0))
            }
            for (i, entry) in plans.enumerated() { try! queues[i % 2].addOperation(entry.0.retry) }
            // Cancel a quarter of them at random moments, from another thread.
            let toCancel = plans.filter(\.cancel).map(\.0)
            let pauses = toCancel.map { _ in rng.int(0...200) }
            runThreads(ctx, 1, name: "retry-cancel") { _ in
                for (plan, pause) in zip(toCancel, pauses) {
                    sleepMicros(pause)
                    plan.retry.cancel()
                    plan.cancelReturned.store(true, ordering: .releasing)
                }
            }
            guard ctx.drain(queues) else { ctx.violation("not-finished", "round \(rounds) did not drain"); return }
            for (plan, _) in plans { self.check(ctx, plan) }
            ctx.count(plans.count)
            rounds += 1
        }
        ctx.figure("rounds", "\(rounds)")
    }

    static func check(_ ctx: ScenarioContext, _ plan: RetryPlan) {
        let retry = plan.retry!
        ctx.check(retry.isFinished, "not-finished", "a retry of queue drained but not finished")
        ctx.check(plan.lateRuns.load(ordering: .relaxed) == 0, "ran-after-cancel",
                  "\(plan.lateRuns.load(ordering: .relaxed)) attempt(s) began after cancel() returned")
        let made = retry.attemptsMade
        let errors = retry.attemptErrors.map { ($0 as? RetryFailure)?.attempt ?? -1 }
        let succeeded = plan.succeedsOn >= 1 && plan.succeedsOn <= plan.maxAttempts
        if retry.isCancelled {
            // Stopped somewhere: every attempt it made before the last failed, in order.
            ctx.check(made <= plan.maxAttempts && Array(errors.prefix(max(made - 1, 0))) == Array(1..<max(made, 1)),
                      "outcome", "cancelled retry: made \(made), errors \(errors)")
            return
        }
        let expected = succeeded ? plan.succeedsOn : plan.maxAttempts
        ctx.check(made == expected, "attempts", "made \(made), expected \(expected) (plan \(plan.succeedsOn)/\(plan.maxAttempts))")
        if succeeded {
            let result = (retry.succeededAttempt as? RetryAttempt)?.attempt
            ctx.check(retry.error == nil && result == plan.succeedsOn && errors == Array(1..<plan.succeedsOn),
                      "outcome", "success on \(plan.succeedsOn): error \(String(describing: retry.error)), result "
                          + "\(String(describing: result)), errors \(errors)")
        } else {
            ctx.check((retry.error as? RetryFailure) == RetryFailure(attempt: plan.maxAttempts)
                          && errors == Array(1...plan.maxAttempts) && retry.succeededAttempt == nil,
                      "outcome", "no success: error \(String(describing: retry.error)), errors \(errors)")
        }
    }
}
