import Synchronization
import Testing
@testable import Spindle

/// Two long-lived threads that, each round, run their action at nearly the same time (they meet on a short spin
/// barrier after being released by semaphores). The test thread prepares each round and checks it afterwards.
private final class RacingPair: Sendable {
    private let go = (opSemaphore(), opSemaphore())
    private let done = (opSemaphore(), opSemaphore())
    private let actions = OpBox<(@Sendable () -> Void, @Sendable () -> Void)?>(nil)
    private let arrived = OpCounter()
    private let stop = OpFlag()
    private let threads: [OpThread]

    init() throws {
        let go = self.go, done = self.done, actions = self.actions, arrived = self.arrived, stop = self.stop
        @Sendable func loop(_ side: Int) {
            let (myGo, myDone) = side == 0 ? (go.0, done.0) : (go.1, done.1)
            while myGo.wait(timeout: opDeadline), !stop.isSet {
                guard let pair = actions.value else { continue }
                arrived.increment()
                var spins = 0
                while arrived.value % 2 != 0 && spins < 200_000 { spins += 1 }
                if side == 0 { pair.0() } else { pair.1() }
                myDone.signal()
            }
        }
        self.threads = [try OpThread.run("op-race-0") { loop(0) }, try OpThread.run("op-race-1") { loop(1) }]
    }

    /// Runs one round; false if a side did not come back within the deadline.
    func round(_ left: @escaping @Sendable () -> Void, _ right: @escaping @Sendable () -> Void) -> Bool {
        self.actions.value = (left, right)
        self.go.0.signal()
        self.go.1.signal()
        return self.done.0.wait(timeout: opDeadline) && self.done.1.wait(timeout: opDeadline)
    }

    func stopAndJoin() -> Bool {
        self.stop.set()
        self.go.0.signal()
        self.go.1.signal()
        return self.threads.allSatisfy { $0.finish() }
    }
}

/// Races between threads on one operation (no queue).
@Suite struct OperationRaceTests {
    // cancel() against start(): main runs iff start claimed the operation before cancel; a cancelled-before-start
    // operation never runs main; whatever happens, it finishes exactly once and completes exactly once.
    @Test func cancelRacingStart() throws {
        let rounds = 10_000
        let pair = try RacingPair()
        var failures: [String] = []
        var mainRan = 0
        var cancelledFirst = 0
        for round in 0..<rounds {
            let sawCancelInMain = OpBox<Bool?>(nil)
            let op = OpProbe { op in sawCancelInMain.value = op.isCancelled }
            let startError = OpBox<String?>("unset")
            let cancelSawFinished = OpBox(false)
            guard pair.round({ startError.value = opErrorCase { try op.start() } },
                             { op.cancel(); cancelSawFinished.value = op.currentState.lifecycle >= .finishing }) else {
                failures.append("round \(round): a side hung")
                break
            }
            var problems: [String] = []
            if startError.value != nil { problems.append("start threw \(startError.value!)") }
            if !op.isFinished || op.isExecuting { problems.append("state \(op)") }
            if op.completions.value != 1 { problems.append("\(op.completions.value) completions") }
            if op.mainRuns.value > 1 { problems.append("main ran \(op.mainRuns.value) times") }
            if op.mainRuns.value == 0 {
                cancelledFirst += 1
                // main did not run: only because cancel won, so the operation must read cancelled.
                if !op.isCancelled { problems.append("main skipped but not cancelled") }
            } else {
                mainRan += 1
                // main ran: start won. cancel came later, so it either landed while executing (cancelled) or after
                // the end (no effect, and then it saw the operation finishing or finished).
                if !op.isCancelled && !cancelSawFinished.value {
                    problems.append("cancel during execution was lost")
                }
            }
            if (try? op.waitUntilFinished(timeout: .zero)) != true { problems.append("not settled after start") }
            if !problems.isEmpty { failures.append("round \(round): \(problems)") }
            if failures.count >= 5 { break }
        }
        #expect(pair.stopAndJoin())
        #expect(failures.isEmpty, "\(failures)")
        #expect(mainRan + cancelledFirst == rounds)
    }

    // One thread registers an observer while another runs start(): the observer gets did isFinished exactly once
    // (through delivery if registered before the end, or at registration if after) and nothing after it.
    @Test func observerRegisteredDuringStartGetsTheEndExactlyOnce() throws {
        let rounds = 1_000
        let pair = try RacingPair()
        var failures: [String] = []
        for round in 0..<rounds {
            let op = OpProbe()
            let log = OpLog<String>()
            guard pair.round({ try? op.start() },
                             { op.observe { _, change in log.add(change.phaseAndKey) } }) else {
                failures.append("round \(round): a side hung")
                break
            }
            let events = log.all
            let ends = events.filter { $0 == "did isFinished" }.count
            if ends != 1 { failures.append("round \(round): \(ends) did isFinished in \(events)") }
            if events.last != "did isFinished" { failures.append("round \(round): not last in \(events)") }
            if failures.count >= 5 { break }
        }
        #expect(pair.stopAndJoin())
        #expect(failures.isEmpty, "\(failures)")
    }

    // A concurrent operation's start (`beginExecuting`) racing a finish() from a thread that finishes it as soon as
    // it reads executing (the "finish if executing" pattern): an observer registered before gets "executing" before
    // "not executing", never after it, and "finished" last.
    @Test func observedStartRacingAFinishDeliversExecutingInOrder() throws {
        let rounds = 5_000  // before the fix, rounds 325 and 679 of one run already broke the order
        let pair = try RacingPair()
        var failures: [String] = []
        for round in 0..<rounds {
            let op = OpManualAsync()
            let log = OpLog<String>()
            op.observe([.isExecuting, .isFinished]) { _, change in
                guard change.phase == .did, case .bool(let value) = change.newValue else { return }
                log.add("\(change.key) \(value)")
            }
            guard pair.round({ _ = try? op.start() },
                             {
                                 var spins = 0
                                 while !op.isExecuting && spins < 1_000_000 { spins += 1 }
                                 _ = try? op.finish(throwing: nil)
                             }) else {
                failures.append("round \(round): a side hung")
                break
            }
            if !op.isFinished { _ = try? op.finish(throwing: nil) }  // the finishing side gave up spinning
            let events = log.all
            if events != ["isExecuting true", "isExecuting false", "isFinished true"] {
                failures.append("round \(round): \(events)")
            }
            if failures.count >= 5 { break }
        }
        #expect(pair.stopAndJoin())
        #expect(failures.isEmpty, "\(failures)")
    }

    // Two threads start() the same operation: main runs once, the other call throws operationExecuting or (if
    // the first already finished) returns without effect.
    @Test func racingStartsRunMainOnce() throws {
        let rounds = 2_000
        let pair = try RacingPair()
        var failures: [String] = []
        for round in 0..<rounds {
            let op = OpProbe()
            let results = (OpBox<String?>("unset"), OpBox<String?>("unset"))
            guard pair.round({ results.0.value = opErrorCase { try op.start() } },
                             { results.1.value = opErrorCase { try op.start() } }) else {
                failures.append("round \(round): a side hung")
                break
            }
            let errors = [results.0.value, results.1.value].compactMap { $0 }
            if op.mainRuns.value != 1 { failures.append("round \(round): main ran \(op.mainRuns.value) times") }
            if op.completions.value != 1 { failures.append("round \(round): \(op.completions.value) completions") }
            if errors.contains(where: { $0 != "operationExecuting" }) { failures.append("round \(round): \(errors)") }
            if failures.count >= 5 { break }
        }
        #expect(pair.stopAndJoin())
        #expect(failures.isEmpty, "\(failures)")
    }

    // cancel() racing finish() of a concurrent operation: it finishes once, never reads executing and finished.
    @Test func cancelRacingFinish() throws {
        let rounds = 2_000
        let pair = try RacingPair()
        var failures: [String] = []
        for round in 0..<rounds {
            let op = OpManualAsync()
            try op.start()
            let finishError = OpBox<String?>("unset")
            guard pair.round({ finishError.value = opErrorCase { try op.finish() } }, { op.cancel() }) else {
                failures.append("round \(round): a side hung")
                break
            }
            if finishError.value != nil { failures.append("round \(round): finish threw \(finishError.value!)") }
            if !op.isFinished || op.isExecuting { failures.append("round \(round): state \(op)") }
            if op.completions.value != 1 { failures.append("round \(round): \(op.completions.value) completions") }
            if failures.count >= 5 { break }
        }
        #expect(pair.stopAndJoin())
        #expect(failures.isEmpty, "\(failures)")
    }
}
