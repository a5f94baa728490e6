import Spindle
import Synchronization

// `semaphore`: SpindleSemaphore hammering and timeout inputs.
// (a) exactness: T threads × M wait/increment/signal laps with an initial count of 1 (a plain counter guarded
//     only by the semaphore: exact, and TSan-clean) and of 3 (holders at once ≤ 3); final value == initial.
// (b) conservation: producers signal while consumers take with random short timeouts; successful waits + final
//     value == signals.
// (c) timeouts drawn from {negative, zero, tiny, huge, Duration.seconds(Int64.max)} on semaphore waits,
//     waitUntilFinished and waitUntilAllOperationsAreFinished: ≤ 0 polls and returns at once; tiny ones time out
//     no earlier than asked and return within a bound; huge ones wait and return true once signalled; deadlines
//     saturate without overflow.

final class PlainCounter: @unchecked Sendable { var value = 0 }

final class GateOp: SpindleOperation, @unchecked Sendable {
    let live = LiveToken()
    let gate = try! SpindleSemaphore(value: 0)
    override func main() throws { _ = self.gate.wait(timeout: .seconds(10)) }
}

enum SemaphoreScenario {
    static let invariants = ["count-mismatch", "holders-exceeded", "wait-timed-out", "permits-not-conserved",
                             "poll-blocked", "early-timeout", "timeout-overshoot", "huge-timeout-failed",
                             "deadline-overflow", "spurious-success", "thread-stuck"]

    static let badTimeouts: [(String, Duration)] = [
        ("-1s", .seconds(-1)), ("Int64.min ns", .nanoseconds(Int64.min)), ("zero", .zero), ("1ns", .nanoseconds(1)),
        ("50us", .microseconds(50)), ("2ms", .milliseconds(2)),
    ]
    static let hugeTimeouts: [(String, Duration)] = [
        ("2^40 s", .seconds(Int64(1) << 40)), ("Int64.max s", .seconds(Int64.max)),
        ("Int64.max ns", .nanoseconds(Int64.max)),
    ]

    static func run(_ ctx: ScenarioContext) {
        var rng = SplitMix64.derive(ctx.seed, 7)
        var rounds = 0
        var maxOvershootNs: UInt64 = 0
        let threads = max(2, ctx.config.threads)
        while ctx.running {
            rounds += 1
            // (a) exactness
            for k in [1, 3] where ctx.running {
                let s = try! SpindleSemaphore(value: k)
                let plain = PlainCounter()
                let total = Atomic<Int>(0)
                let holders = HighWater()
                let laps = rng.int(500...3000)
                runThreads(ctx, threads, name: "sem-hammer") { _ in
                    for _ in 0..<laps {
                        guard s.wait(timeout: .seconds(5)) else {
                            ctx.violation("wait-timed-out", "a 5 s wait on a semaphore (k=\(k)) got nothing")
                            continue
                        }
                        let h = holders.enter()
                        if h > k { ctx.violation("holders-exceeded", "\(h) holders of a k=\(k) semaphore") }
                        if k == 1 { plain.value += 1 }
                        total.add(1, ordering: .relaxed)
                        holders.leave()
                        s.signal()
                    }
                    ctx.count(2 * laps)
                }
                let expected = threads * laps
                if total.load(ordering: .relaxed) != expected || (k == 1 && plain.value != expected) || s.value != k {
                    ctx.violation("count-mismatch", "k=\(k): total \(total.load(ordering: .relaxed)), plain "
                        + "\(plain.value), expected \(expected), final value \(s.value)")
                }
            }
            // (b) conservation under timeout/signal races
            if ctx.running {
                let s = try! SpindleSemaphore(value: 0)
                let taken = Atomic<Int>(0)
                let producersDone = Atomic<Int>(0)
                let perProducer = rng.int(500...3000)
                let producers = max(1, threads / 2)
                let roundSeed = rng.next()
                runThreads(ctx, producers + max(1, threads - producers), name: "sem-race") { t in
                    var local = SplitMix64.derive(roundSeed, UInt64(t))
                    if t < producers {
                        for _ in 0..<perProducer {
                            s.signal()
                            if local.chance(0.05) { sleepMicros(local.int(1...50)) }
                        }
                        producersDone.add(1, ordering: .releasing)
                        ctx.count(perProducer)
                        return
                    }
                    let choices: [Duration] = [.zero, .nanoseconds(1), .microseconds(1), .microseconds(100), .milliseconds(1)]
                    var n = 0
                    while true {
                        let finished = producersDone.load(ordering: .acquiring) == producers
                        if s.wait(timeout: choices[local.int(0..<choices.count)]) {
                            taken.add(1, ordering: .relaxed)
                        } else if finished {
                            break
                        }
                        n += 1
                    }
                    ctx.count(n)
                }
                let signals = producers * perProducer
                let got = taken.load(ordering: .relaxed)
                if got + s.value != signals {
                    ctx.violation("permits-not-conserved", "\(signals) signals, \(got) successful waits, final \(s.value)")
                }
            }
            // (c) bad and huge timeouts
            if ctx.running { maxOvershootNs = max(maxOvershootNs, self.timeouts(ctx, &rng)) }
        }
        ctx.figure("rounds", "\(rounds)")
        ctx.figure("max-overshoot", "\(fmt(Double(maxOvershootNs) / 1e6, 2)) ms")
    }

    /// Returns the largest overshoot seen (ns past the requested timeout).
    static func timeouts(_ ctx: ScenarioContext, _ rng: inout SplitMix64) -> UInt64 {
        var overshoot: UInt64 = 0
        // Deadline arithmetic.
        let checks: [(String, Bool)] = [
            ("after(.seconds(Int64.max)) == distantFuture", SpindleDeadline.after(.seconds(Int64.max)) == .distantFuture),
            ("after(.nanoseconds(Int64.max)) is ~292 years away", !SpindleDeadline.after(.nanoseconds(Int64.max)).hasPassed),
            ("after(.seconds(-1)) has passed", SpindleDeadline.after(.seconds(-1)).hasPassed),
            ("after(.nanoseconds(Int64.min)) has passed", SpindleDeadline.after(.nanoseconds(Int64.min)).hasPassed),
            ("after(seconds: +inf) == distantFuture", (try? SpindleDeadline.after(seconds: .infinity)) == .distantFuture),
            ("after(seconds: -inf) has passed", (try? SpindleDeadline.after(seconds: -.infinity))?.hasPassed == true),
            ("after(seconds: 1e300) == distantFuture", (try? SpindleDeadline.after(seconds: 1e300)) == .distantFuture),
            ("distantFuture.remaining > 2^32 s", SpindleDeadline.distantFuture.remaining > .seconds(Int64(1) << 32)),
        ]
        for (what, ok) in checks {
            ctx.count()
            if !ok { ctx.violation("deadline-overflow", what) }
        }
        // Short and non-positive timeouts, on a semaphore, an operation and a queue that cannot complete.
        let s = try! SpindleSemaphore(value: 0)
        let op = GateOp()
        let q = ctx.makeQueue("sem-timeouts", width: 1)
        let blocker = GateOp()
        try! q.addOperation(blocker)
        for (label, timeout) in badTimeouts.shuffled(using: &rng) {
            let requested = timeout.components.seconds < 0 || timeout == .zero ? 0
                : UInt64(timeout.components.seconds) * 1_000_000_000 + UInt64(timeout.components.attoseconds / 1_000_000_000)
            for target in 0..<3 {
                let t0 = nowNs()
                let got: Bool
                switch target {
                case 0: got = s.wait(timeout: timeout)
                case 1: got = (try? op.waitUntilFinished(timeout: timeout)) ?? true
                default: got = (try? q.waitUntilAllOperationsAreFinished(timeout: timeout)) ?? true
                }
                let elapsed = nowNs() - t0
                ctx.count()
                let what = ["semaphore.wait", "waitUntilFinished", "waitUntilAllOperationsAreFinished"][target]
                if got { ctx.violation("spurious-success", "\(what)(timeout: \(label)) returned true with nothing to get") }
                if requested == 0 && elapsed > 200_000_000 {
                    ctx.violation("poll-blocked", "\(what)(timeout: \(label)) took \(fmt(Double(elapsed) / 1e6)) ms")
                }
                if requested > 0 && elapsed < requested {
                    ctx.violation("early-timeout", "\(what)(timeout: \(label)) returned after \(elapsed) ns")
                }
                if requested > 0 && elapsed > requested {
                    overshoot = max(overshoot, elapsed - requested)
                    if elapsed - requested > 1_000_000_000 {
                        ctx.violation("timeout-overshoot", "\(what)(timeout: \(label)) overshot by "
                            + "\(fmt(Double(elapsed - requested) / 1e6)) ms")
                    }
                }
            }
        }
        // Huge timeouts: something arrives a few ms later; the wait must return true, promptly.
        for (label, timeout) in hugeTimeouts {
            for target in 0..<3 {
                let t0 = nowNs()
                let delay = rng.int(500...3000)
                let freshOp = GateOp()
                let freshQ = ctx.makeQueue("sem-huge", width: 1)
                let gated = GateOp()
                try! freshQ.addOperation(gated)
                let helper = try! spawnRetryingOrThrow(name: "sem-huge") {
                    sleepMicros(delay)
                    switch target {
                    case 0: s.signal()
                    case 1: freshOp.gate.signal(); try? freshOp.start()
                    default: gated.gate.signal()
                    }
                }
                let got: Bool
                switch target {
                case 0: got = s.wait(timeout: timeout)
                case 1: got = (try? freshOp.waitUntilFinished(timeout: timeout)) ?? false
                default: got = (try? freshQ.waitUntilAllOperationsAreFinished(timeout: timeout)) ?? false
                }
                let elapsed = nowNs() - t0
                try? helper.join()
                ctx.count()
                let what = ["semaphore.wait", "waitUntilFinished", "waitUntilAllOperationsAreFinished"][target]
                if !got { ctx.violation("huge-timeout-failed", "\(what)(timeout: \(label)) returned false") }
                if elapsed > 2_000_000_000 {
                    ctx.violation("timeout-overshoot", "\(what)(timeout: \(label)) took \(fmt(Double(elapsed) / 1e6)) ms "
                        + "after a \(delay) µs signal")
                }
                if target != 2 { gated.gate.signal() }
                ctx.drain([freshQ])
            }
        }
        blocker.gate.signal()
        ctx.drain([q])
        return overshoot
    }
}
