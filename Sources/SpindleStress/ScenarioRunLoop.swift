import Spindle
import Synchronization

// `runloop`: one SpindleRunLoop thread under storms from several threads, and operations parked in their own
// worker's run loop (seed 004).
// (a) Port storms: S sender threads send numbered messages into one port scheduled on the loop thread
//     (sometimes scheduled only after the senders started); in half the rounds one sender invalidates the port
//     mid-storm. Every accepted send is delivered exactly once, in per-sender order, on the loop thread; every send
//     after invalidation throws portInvalidated and is never delivered; the invalidation handler runs once, on the
//     loop thread, after the last delivery.
// (b) Perform storms: S threads call perform on the loop (some performs schedule a follow-up perform from the
//     loop thread): each runs exactly once, on the loop thread, in per-sender FIFO order.
// (c) Parked operations: queued operations add a port to SpindleRunLoop.current and run until it is invalidated;
//     a "network" thread sends the reply and invalidates, or cancel() invalidates (racing the reply, or before the
//     operation starts). Every accepted reply is delivered exactly once, on the operation's thread; every parked
//     main returns with the invalidation complete (never by its 10 s deadline); the queue drains.

struct StormMessage: Sendable {
    let sender: Int
    let seq: Int
}

/// What the loop thread saw of one port storm (only the loop thread writes while the storm runs).
final class PortSink: @unchecked Sendable {
    let state: SpindleLockedValue<(next: [Int], delivered: Int, retired: Bool, handlerRuns: Int)>
    init(senders: Int) { self.state = SpindleLockedValue((Array(repeating: 0, count: senders), 0, false, 0)) }
}

/// An operation that parks in its worker's run loop until its port is invalidated (seed 004).
final class PortWaitOp: SpindleOperation, @unchecked Sendable {
    final class Tally: @unchecked Sendable {
        let received = Atomic<Int>(0)
        let wrongThread = Atomic<Int>(0)
        let tid = Atomic<Int32>(0)
    }
    let live = LiveToken()
    let tally = Tally()
    let port: SpindlePort<Int>
    let parked = Atomic<Bool>(false)
    let ran = Atomic<Int>(0)
    /// -1 main not run or not returned; 0 its wait hit the deadline; 1 invalidation completed; 2 the port was
    /// invalidated before main could schedule it.
    let outcome = Atomic<Int>(-1)
    let accepted = Atomic<Int>(0)

    override init() {
        let tally = self.tally
        self.port = SpindlePort(name: "upload") { _ in
            tally.received.add(1, ordering: .relaxed)
            if SpindleThread.current.threadID != tally.tid.load(ordering: .acquiring) {
                tally.wrongThread.add(1, ordering: .relaxed)
            }
        }
        super.init()
    }

    override func main() throws {
        self.ran.add(1, ordering: .relaxed)
        self.tally.tid.store(SpindleThread.current.threadID, ordering: .releasing)
        let loop = SpindleRunLoop.current
        do { try loop.add(self.port) } catch {
            self.outcome.store(2, ordering: .releasing)
            return
        }
        self.parked.store(true, ordering: .releasing)
        let invalidated = try loop.run(untilInvalidated: self.port, before: .after(.seconds(10)))
        self.outcome.store(invalidated ? 1 : 0, ordering: .releasing)
    }

    /// The network callback: the reply, then the end of the wait.
    func complete() {
        if (try? self.port.send(200)) != nil { self.accepted.add(1, ordering: .relaxed) }
        self.port.invalidate()
    }

    override func cancel() {
        super.cancel()
        self.port.invalidate()
    }
}

enum RunLoopScenario {
    static let invariants = ["message-lost", "message-duplicated", "message-out-of-order", "wrong-thread",
                             "send-after-invalidate-accepted", "delivered-after-invalidation", "invalidation-not-once",
                             "perform-not-once", "perform-out-of-order", "perform-lost", "park-timeout",
                             "reply-lost", "reply-duplicated", "wrong-error", "not-finished", "drain-timeout",
                             "thread-stuck"]

    static func run(_ ctx: ScenarioContext) {
        var rng = SplitMix64.derive(ctx.seed, 22)
        guard let lt = LoopThread(ctx, name: "stress-loop") else { return }
        let parkQueue = ctx.makeQueue("runloop-parked", width: 3)
        var rounds = 0
        var messages = 0
        var performs = 0
        var parkedOps = 0
        let senders = max(2, ctx.config.threads)
        while ctx.running {
            rounds += 1
            messages += portStorm(ctx, lt, senders: senders, &rng)
            if !ctx.running { break }
            performs += performStorm(ctx, lt, senders: senders, &rng)
            if !ctx.running { break }
            let (n, ok) = parked(ctx, parkQueue, &rng)
            parkedOps += n
            if !ok { break }
        }
        lt.stop(ctx)
        ctx.drain([parkQueue])
        ctx.figure("rounds", "\(rounds)")
        ctx.figure("messages", "\(messages)")
        ctx.figure("performs", "\(performs)")
        ctx.figure("parked-ops", "\(parkedOps)")
    }

    /// One port storm; returns the messages delivered.
    static func portStorm(_ ctx: ScenarioContext, _ lt: LoopThread, senders: Int, _ rng: inout SplitMix64) -> Int {
        let sink = PortSink(senders: senders)
        let retired = try! SpindleSemaphore(value: 0)
        let loopTid = lt.tid
        let port = SpindlePort<StormMessage>(name: "storm", invalidationHandler: {
            let runs = sink.state.withLockedValue { s -> Int in
                s.retired = true
                s.handlerRuns += 1
                return s.handlerRuns
            }
            if runs != 1 { ctx.violation("invalidation-not-once", "invalidation handler ran \(runs) times") }
            if SpindleThread.current.threadID != loopTid {
                ctx.violation("wrong-thread", "invalidation handler of a scheduled port ran off the loop thread")
            }
            retired.signal()
        }) { m in
            if SpindleThread.current.threadID != loopTid { ctx.violation("wrong-thread", "message delivered off the loop thread") }
            let (expected, wasRetired) = sink.state.withLockedValue { s -> (Int, Bool) in
                let e = s.next[m.sender]
                if m.seq >= e { s.next[m.sender] = m.seq + 1 }
                s.delivered += 1
                return (e, s.retired)
            }
            if wasRetired { ctx.violation("delivered-after-invalidation", "sender \(m.sender) #\(m.seq) after the handler") }
            if m.seq < expected {
                ctx.violation("message-duplicated", "sender \(m.sender) #\(m.seq) delivered again (next was \(expected))")
            } else if m.seq > expected {
                ctx.violation("message-out-of-order", "sender \(m.sender) #\(m.seq) delivered, expected #\(expected)")
            }
            ctx.count()
        }
        let lateAdd = rng.chance(0.3)
        let added = Atomic<Bool>(false)
        if !lateAdd {
            try! lt.loop.add(port)
            added.store(true, ordering: .releasing)
        }
        let perSender = rng.int(200...2000)
        let invalidator = rng.chance(0.5) ? rng.int(0..<senders) : -1
        let invalidateAt = rng.int(0..<perSender)
        let acceptedCounts = SpindleLockedValue([Int](repeating: 0, count: senders))
        let roundSeed = rng.next()
        // Sender threads, plus (for a late add) one thread that schedules the port after a moment.
        runThreads(ctx, senders + (lateAdd ? 1 : 0), name: "port-storm") { t in
            if t == senders {
                sleepMicros(200)
                try! lt.loop.add(port)
                added.store(true, ordering: .releasing)
                return
            }
            var local = SplitMix64.derive(roundSeed, UInt64(t))
            var accepted = 0
            for seq in 0..<perSender {
                if t == invalidator && seq == invalidateAt {
                    // Invalidate only once the port is scheduled (an unscheduled port discards its pending
                    // messages, as documented).
                    while !added.load(ordering: .acquiring) { sleepMicros(20) }
                    port.invalidate()
                }
                do {
                    try port.send(StormMessage(sender: t, seq: seq))
                    accepted += 1
                } catch {
                    if case .portInvalidated? = error as? SpindleError {} else { ctx.violation("wrong-error", "send threw \(error)") }
                    // Once rejected, every later send must be too.
                    if (try? port.send(StormMessage(sender: t, seq: perSender + 1))) != nil {
                        ctx.violation("send-after-invalidate-accepted", "sender \(t): a send after a rejected one was accepted")
                    }
                    break
                }
                if local.chance(0.002) { sleepMicros(local.int(1...100)) }
            }
            acceptedCounts.withLockedValue { $0[t] = accepted }
        }
        while !added.load(ordering: .acquiring) { sleepMicros(50) }
        port.invalidate()
        if !retired.wait(timeout: .seconds(10)) {
            ctx.violation("message-lost", "the invalidation handler did not run within 10 s: \(port)")
            return 0
        }
        if (try? port.send(StormMessage(sender: 0, seq: perSender + 2))) != nil {
            ctx.violation("send-after-invalidate-accepted", "a send after invalidation was accepted")
        }
        let accepted = acceptedCounts.withLockedValue { $0 }
        let (next, delivered) = sink.state.withLockedValue { ($0.next, $0.delivered) }
        for s in 0..<senders where next[s] != accepted[s] {
            ctx.violation(next[s] < accepted[s] ? "message-lost" : "message-duplicated",
                          "sender \(s): \(accepted[s]) accepted, delivered up to #\(next[s] - 1)")
        }
        let total = accepted.reduce(0, +)
        if delivered != total && next == accepted {
            ctx.violation("message-duplicated", "\(total) accepted, \(delivered) deliveries")
        }
        return delivered
    }

    /// One perform storm; returns the performs run.
    static func performStorm(_ ctx: ScenarioContext, _ lt: LoopThread, senders: Int, _ rng: inout SplitMix64) -> Int {
        let per = rng.int(200...1500)
        let next = SpindleLockedValue([Int](repeating: 0, count: senders))
        let followUps = Atomic<Int>(0)  // scheduled from the loop thread
        let followUpsRun = Atomic<Int>(0)
        let ran = Atomic<Int>(0)
        let loop = lt.loop!
        let loopTid = lt.tid
        let roundSeed = rng.next()
        runThreads(ctx, senders, name: "perform-storm") { t in
            var local = SplitMix64.derive(roundSeed, UInt64(t))
            for seq in 0..<per {
                let follow = local.chance(0.1)
                loop.perform {
                    if SpindleThread.current.threadID != loopTid { ctx.violation("wrong-thread", "perform ran off the loop thread") }
                    let expected = next.withLockedValue { n -> Int in
                        let e = n[t]
                        if seq >= e { n[t] = seq + 1 }
                        return e
                    }
                    if seq < expected { ctx.violation("perform-not-once", "sender \(t) perform #\(seq) ran again") }
                    else if seq > expected {
                        ctx.violation("perform-out-of-order", "sender \(t) perform #\(seq) ran, expected #\(expected)")
                    }
                    if follow {
                        followUps.add(1, ordering: .relaxed)
                        let once = Atomic<Int>(0)
                        loop.perform {
                            let n = once.add(1, ordering: .relaxed).newValue
                            if n != 1 { ctx.violation("perform-not-once", "a follow-up perform ran \(n) times") }
                            followUpsRun.add(1, ordering: .relaxed)
                            ctx.count()
                        }
                    }
                    ran.add(1, ordering: .releasing)
                    ctx.count()
                }
                if local.chance(0.002) { sleepMicros(local.int(1...100)) }
            }
        }
        let total = senders * per
        let deadline = SpindleDeadline.after(.seconds(10))
        while (ran.load(ordering: .acquiring) < total
               || followUpsRun.load(ordering: .acquiring) < followUps.load(ordering: .acquiring)) && !deadline.hasPassed {
            sleepMicros(200)
        }
        // A perform of our own, last: by FIFO every earlier one has run when it does.
        let fence = try! SpindleSemaphore(value: 0)
        loop.perform { fence.signal() }
        _ = fence.wait(timeout: .seconds(10))
        let got = ran.load(ordering: .acquiring)
        let fu = followUpsRun.load(ordering: .acquiring), fuWanted = followUps.load(ordering: .acquiring)
        if got != total { ctx.violation(got < total ? "perform-lost" : "perform-not-once", "\(total) performs, \(got) ran") }
        if fu != fuWanted { ctx.violation(fu < fuWanted ? "perform-lost" : "perform-not-once", "\(fuWanted) follow-ups, \(fu) ran") }
        let finalNext = next.withLockedValue { $0 }
        for (s, n) in finalNext.enumerated() where n != per {
            ctx.violation("perform-lost", "sender \(s): performs ran up to #\(n - 1) of \(per)")
        }
        return got + fu
    }

    /// One round of parked operations; returns how many and whether the queue drained.
    static func parked(_ ctx: ScenarioContext, _ q: SpindleOperationQueue, _ rng: inout SplitMix64) -> (Int, Bool) {
        let n = rng.int(6...24)
        var ops: [PortWaitOp] = []
        var actions: [Int] = []  // 0 complete, 1 cancel, 2 both racing, 3 cancelled before add
        for _ in 0..<n {
            let op = PortWaitOp()
            let action = rng.int(0..<10) < 4 ? 0 : [1, 2, 2, 3, 1, 0][rng.int(0..<6)]
            if action == 3 { op.cancel() }
            op.completionBlock = { ctx.count() }
            ops.append(op)
            actions.append(action)
        }
        try! q.addOperations(ops)
        let frozen = ops
        let frozenActions = actions
        let roundSeed = rng.next()
        // Network threads: each owns every third op; completes an op once it is parked, cancels at random times.
        runThreads(ctx, 3, name: "network") { t in
            var local = SplitMix64.derive(roundSeed, UInt64(t))
            var pending = Array(stride(from: t, to: n, by: 3))
            let deadline = SpindleDeadline.after(.seconds(20))
            while !pending.isEmpty && !deadline.hasPassed {
                pending.removeAll { i in
                    let op = frozen[i]
                    switch frozenActions[i] {
                    case 0:
                        guard op.parked.load(ordering: .acquiring) || op.isFinished else { return false }
                        op.complete()
                    case 1:
                        guard local.chance(0.3) else { return false }
                        op.cancel()
                    case 2:
                        guard op.parked.load(ordering: .acquiring) || op.isFinished else { return false }
                        if local.chance(0.5) { op.complete(); op.cancel() } else { op.cancel(); op.complete() }
                    default:
                        break
                    }
                    return true
                }
                if !pending.isEmpty { sleepMicros(local.int(20...200)) }
            }
        }
        guard ctx.drain([q], timeout: .seconds(30)) else { return (n, false) }
        for (i, op) in frozen.enumerated() {
            if !op.isFinished { ctx.violation("not-finished", "parked op \(i): \(op)") }
            let received = op.tally.received.load(ordering: .relaxed)
            let accepted = op.accepted.load(ordering: .relaxed)
            let outcome = op.outcome.load(ordering: .acquiring)
            if op.tally.wrongThread.load(ordering: .relaxed) > 0 {
                ctx.violation("wrong-thread", "parked op \(i): reply delivered off its thread")
            }
            if op.ran.load(ordering: .relaxed) == 0 {
                if actions[i] == 0 { ctx.violation("not-finished", "parked op \(i) was never run") }
                continue
            }
            if outcome == 0 { ctx.violation("park-timeout", "parked op \(i): run(untilInvalidated:) hit its 10 s deadline") }
            if outcome == 1 && received != accepted {
                ctx.violation(received < accepted ? "reply-lost" : "reply-duplicated",
                              "parked op \(i): \(accepted) reply accepted, \(received) delivered")
            }
            if outcome == 2 && received != 0 {
                ctx.violation("reply-duplicated", "parked op \(i): reply delivered although the port was never scheduled")
            }
        }
        return (n, true)
    }
}
