import Spindle
import Synchronization

// Part of `misuse`: bad timeouts for every timed wait (contract Part 1, item 3: a timeout of zero or less polls;
// huge, infinite and NaN timeouts are handled without overflow). Timeouts: negative (-1 s, -∞, -1 ns,
// Int64.min ns), zero (0, -0.0, Duration.zero, 1e-12 s), huge (1.7e10 s, 1e300 s, greatestFiniteMagnitude,
// Int64.max s, Int64.max ns), infinite (+∞) and NaN, given as a Double through SpindleDeadline.after(seconds:)
// or as a Duration through the `timeout:` forms and SpindleDeadline.after(_:). Waits: semaphore, operation,
// queue, condition (plain and with a predicate), run loop run(until:), runOnce(before:) and
// run(untilInvalidated:before:). Every wait runs on a helper thread with a bound, so a hang is counted, not
// suffered.
// - non-positive: returns promptly (< 200 ms) with "nothing happened" (false / no message handled);
// - huge or infinite: waits, and returns the success result promptly (< 2 s) once the event comes a few ms later;
// - NaN: SpindleDeadline.after(seconds:) throws invalidTimeout (the wait is never reached); timer intervals that
//   are NaN, ±∞ or negative throw invalidTimerInterval.
// Invariants: "timeout-hang", "timeout-wrong-result", "timeout-slow", "unreported-misuse", "wrong-error".

extension MisuseScenario {
    enum TimeoutInput {
        case seconds(Double)
        case duration(Duration)
    }
    enum TimeoutKind { case poll, forever, invalid }

    static let timeoutInputs: [(String, TimeoutInput, TimeoutKind)] = [
        ("-1 s", .seconds(-1), .poll), ("-inf", .seconds(-.infinity), .poll), ("-0.0 s", .seconds(-0.0), .poll),
        ("0 s", .seconds(0), .poll), ("1e-12 s", .seconds(1e-12), .poll), ("Duration.zero", .duration(.zero), .poll),
        ("-1 ns", .duration(.nanoseconds(-1)), .poll), ("Int64.min ns", .duration(.nanoseconds(Int64.min)), .poll),
        ("1.7e10 s", .seconds(1.7e10), .forever), ("1e300 s", .seconds(1e300), .forever),
        ("greatestFiniteMagnitude s", .seconds(.greatestFiniteMagnitude), .forever), ("+inf", .seconds(.infinity), .forever),
        ("Int64.max s", .duration(.seconds(Int64.max)), .forever),
        ("Int64.max ns", .duration(.nanoseconds(Int64.max)), .forever),
        ("NaN", .seconds(.nan), .invalid), ("-NaN", .seconds(-.nan), .invalid),
        ("signalling NaN", .seconds(.signalingNaN), .invalid),
    ]

    static let waitNames = ["semaphore.wait", "waitUntilFinished", "waitUntilAllOperationsAreFinished",
                            "condition.wait(until:)", "condition.wait(until:while:)", "runLoop.run(until:)",
                            "runLoop.runOnce(before:)", "runLoop.run(untilInvalidated:before:)"]

    /// Things one wait needs, made fresh per case; `fire()` makes the awaited event happen.
    final class WaitRig: @unchecked Sendable {
        final class Counter: @unchecked Sendable { let n = Atomic<Int>(0) }
        let sem = try! SpindleSemaphore(value: 0)
        let op = GateOp()
        let queue: SpindleOperationQueue?  // only for the queue wait
        let gated = GateOp()
        let cond = SpindleCondition()
        var flag = false  // under cond
        let loopReady = try! SpindleSemaphore(value: 0)
        let handled = Counter()
        let port: SpindlePort<Int>

        init(_ ctx: ScenarioContext, target: Int) {
            self.queue = target == 2 ? ctx.makeQueue("misuse-timeouts", width: 1) : nil
            try! self.queue?.addOperation(self.gated)
            let handled = self.handled
            self.port = SpindlePort(name: "misuse-timeouts") { _ in handled.n.add(1, ordering: .relaxed) }
        }

        /// The awaited event for wait `target`.
        func fire(_ target: Int) {
            switch target {
            case 0: self.sem.signal()
            case 1: self.op.gate.signal(); try? self.op.start()
            case 2: self.gated.gate.signal()
            case 3, 4: self.cond.withLock { self.flag = true }; self.cond.broadcast()
            case 6: try? self.port.send(1)
            default: self.port.invalidate()  // run(until:) runs out of sources; run(untilInvalidated:) ends
            }
        }

        /// Releases whatever is still blocked, so the rig can be freed.
        func release() {
            self.gated.gate.signal()
            self.port.invalidate()
        }

        /// Waits on `target` until `deadline` (or with `duration` through a `timeout:` form). Returns whether the
        /// awaited event was seen.
        func wait(_ target: Int, _ deadline: SpindleDeadline, duration: Duration?) -> Bool {
            switch target {
            case 0: return duration.map { self.sem.wait(timeout: $0) } ?? self.sem.wait(until: deadline)
            case 1:
                return (try? (duration.map { try self.op.waitUntilFinished(timeout: $0) }
                    ?? self.op.waitUntilFinished(until: deadline))) ?? false
            case 2:
                return (try? (duration.map { try self.queue!.waitUntilAllOperationsAreFinished(timeout: $0) }
                    ?? self.queue!.waitUntilAllOperationsAreFinished(until: deadline))) ?? false
            case 3:
                return self.cond.withLock {
                    while !self.flag { if !self.cond.wait(until: deadline) { return self.flag } }
                    return true
                }
            case 4: return self.cond.withLock { self.cond.wait(until: deadline) { !self.flag } }
            default:
                let loop = SpindleRunLoop.current
                try! loop.add(self.port)
                self.loopReady.signal()
                switch target {
                case 5:
                    try! loop.run(until: deadline)
                    return !self.port.isValid
                case 6: return (try? loop.runOnce(before: deadline)) ?? false
                default: return (try? loop.run(untilInvalidated: self.port, before: deadline)) ?? false
                }
            }
        }
    }

    /// One pass over every timeout input and every wait.
    static func badTimeouts(_ ctx: ScenarioContext, _ rng: inout SplitMix64) {
        for (label, interval) in [("NaN", Double.nan), ("+inf", .infinity), ("-inf", -.infinity), ("-1", -1.0)] {
            expect(ctx, "SpindleTimer(interval: \(label))", { if case .invalidTimerInterval = $0 { true } else { false } }) {
                _ = try SpindleTimer(interval: interval, repeats: rng.chance(0.5)) { _ in }
            }
        }
        for (label, input, kind) in timeoutInputs.shuffled(using: &rng) {
            var deadline = SpindleDeadline.now
            var duration: Duration? = nil
            switch input {
            case .seconds(let s):
                if kind == .invalid {
                    expect(ctx, "SpindleDeadline.after(seconds: \(label))", {
                        if case .invalidTimeout = $0 { true } else { false }
                    }) { _ = try SpindleDeadline.after(seconds: s) }
                    continue
                }
                do { deadline = try SpindleDeadline.after(seconds: s) } catch {
                    ctx.violation("wrong-error", "SpindleDeadline.after(seconds: \(label)) threw \(error)")
                    continue
                }
            case .duration(let d):
                deadline = .after(d)
                if rng.chance(0.5) { duration = d }
            }
            for target in 0..<waitNames.count {
                let useDuration = target <= 2 ? duration : nil
                oneWait(ctx, "\(waitNames[target])(\(label)\(useDuration == nil ? "" : ", Duration form"))", target,
                        deadline, useDuration, forever: kind == .forever, delayUs: rng.int(300...2000))
            }
        }
    }

    /// Runs one wait on a helper thread (bounded) and checks its result and timing.
    static func oneWait(_ ctx: ScenarioContext, _ what: String, _ target: Int, _ deadline: SpindleDeadline,
                        _ duration: Duration?, forever: Bool, delayUs: Int) {
        ctx.count()
        let rig = WaitRig(ctx, target: target)
        let done = try! SpindleSemaphore(value: 0)
        let result = Atomic<Int>(-1)
        let t0 = nowNs()
        let waiter: SpindleThread
        do {
            waiter = try spawnRetryingOrThrow(name: "misuse-wait") {
                let got = rig.wait(target, deadline, duration: duration)
                result.store(got ? 1 : 0, ordering: .releasing)
                done.signal()
            }
        } catch {
            ctx.violation("thread-spawn", "could not spawn a waiter: \(error)")
            return
        }
        if target >= 5 && !rig.loopReady.wait(timeout: .seconds(5)) {
            ctx.violation("timeout-hang", "\(what): the waiter did not reach its run loop in 5 s")
        }
        if forever {
            sleepMicros(delayUs)
            rig.fire(target)
        }
        let finished = done.wait(timeout: .seconds(5))
        let elapsed = nowNs() - t0
        if !finished {
            ctx.violation("timeout-hang", "\(what) had not returned after 5 s (\(forever ? "event sent" : "poll"))")
            rig.fire(target)  // let it go, if it ever listens
            rig.release()
            if done.wait(timeout: .seconds(5)) { try? waiter.join() }
            return
        }
        try? waiter.join()
        let got = result.load(ordering: .acquiring) == 1
        if forever {
            if !got { ctx.violation("timeout-wrong-result", "\(what) returned without its event") }
            if elapsed > UInt64(delayUs) * 1000 + 2_000_000_000 {
                ctx.violation("timeout-slow", "\(what) returned \(fmt(Double(elapsed) / 1e6)) ms after start, "
                    + "event at \(delayUs) µs")
            }
        } else {
            if got { ctx.violation("timeout-wrong-result", "\(what) (a poll) reported its event, which never came") }
            if elapsed > 200_000_000 { ctx.violation("timeout-slow", "\(what) (a poll) took \(fmt(Double(elapsed) / 1e6)) ms") }
            if target >= 5 && rig.handled.n.load(ordering: .relaxed) != 0 {
                ctx.violation("timeout-wrong-result", "\(what) delivered a message nobody sent")
            }
        }
        rig.release()
        if let q = rig.queue { ctx.drain([q]) }
    }
}
