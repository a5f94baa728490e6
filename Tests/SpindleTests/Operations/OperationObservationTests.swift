import Synchronization
import Testing
@testable import Spindle

private typealias Change = SpindleOperation.Change

/// Part 1 item 10: observation of an operation's changes (Spindle's replacement for KVO).
@Suite struct OperationObservationTests {
    @Test func startDeliversWillAndDidInOrder() throws {
        let op = OpProbe()
        let changes = opRecordChanges(op, keys: [.isExecuting, .isFinished])
        try op.start()
        let events = changes.all
        #expect(Array(events.prefix(2)) == ["will isExecuting", "did isExecuting"])
        #expect(events.count == 6, "\(events)")
        #expect(events.last == "did isFinished")
        #expect(opProtocolViolations(events).isEmpty, "\(opProtocolViolations(events)) in \(events)")
    }

    @Test func everyKeyIsDeliveredOnlyToObserversOfIt() throws {
        let op = OpProbe()
        let cancelledOnly = opRecordChanges(op, keys: [.isCancelled])
        let everything = opRecordChanges(op)
        op.cancel()
        try op.start()
        #expect(cancelledOnly.all == ["will isCancelled", "did isCancelled"])
        #expect(everything.all.contains("did isCancelled"))
        #expect(everything.all.last == "did isFinished")
        #expect(opProtocolViolations(everything.all).isEmpty, "\(everything.all)")
    }

    @Test func handlersReceiveTheOperation() throws {
        let op = OpProbe()
        let same = OpCounter()
        let total = OpCounter()
        op.observe { observed, _ in
            total.increment()
            if observed === op { same.increment() }
        }
        try op.start()
        #expect(total.value > 0)
        #expect(same.value == total.value)
    }

    // Observers run outside every lock: a handler may read and change the operation and register observers.
    @Test func handlersMayCallBackIntoTheOperation() throws {
        let op = OpProbe(name: "reentrant")
        let nestedFinished = OpCounter()
        let reads = OpCounter()
        let nested = OpBox<SpindleOperation.Observation?>(nil)
        op.observe { op, change in
            _ = op.name
            _ = op.displayName
            _ = op.description
            _ = op.dependencies
            _ = op.error
            _ = op.completionBlock
            _ = op.queuePriority
            _ = op.isReady
            op.name = "reentrant"
            let extra = op.observe([.isCancelled]) { _, _ in }
            op.removeObserver(extra)
            if change.phase == .did && change.key == .isExecuting, nested.value == nil {
                nested.value = op.observe([.isFinished]) { _, change in
                    if change.phase == .did { nestedFinished.increment() }
                }
            }
            reads.increment()
        }
        let runner = try OpThread.run { try? op.start() }
        #expect(runner.finish(), "a handler calling back into the operation deadlocked")
        #expect(op.isFinished)
        #expect(reads.value >= 6)
        #expect(nested.value != nil)
        #expect(nestedFinished.value == 1, "an observer added from a handler gets the end exactly once")
    }

    @Test func removeObserverStopsDeliveries() throws {
        let op = OpProbe()
        let removed = OpCounter()
        let kept = OpCounter()
        let observation = op.observe { _, _ in removed.increment() }
        op.observe { _, _ in kept.increment() }
        op.removeObserver(observation)
        op.queuePriority = .high
        op.cancel()
        try op.start()
        #expect(removed.value == 0)
        #expect(kept.value > 0)
        op.removeObserver(observation)  // a second removal does nothing
    }

    // After `removeObserver` returns on the delivering thread, that handler is not called again.
    @Test func removeObserverFromItsOwnHandlerStopsLaterDeliveries() throws {
        let op = OpProbe()
        let log = OpLog<String>()
        let registration = OpBox<SpindleOperation.Observation?>(nil)
        registration.value = op.observe([.queuePriority, .isCancelled]) { op, change in
            log.add(change.phaseAndKey)
            if let registration = registration.value { op.removeObserver(registration) }
        }
        op.queuePriority = .high
        op.cancel()
        #expect(log.all == ["will queuePriority"], "calls after the handler removed itself: \(log.all)")
    }

    @Test func observerRegisteredAfterFinishGetsOneDidIsFinished() throws {
        let op = OpProbe()
        try op.start()
        let late = opRecordChanges(op)
        #expect(late.all == ["did isFinished"])
        let notInterested = opRecordChanges(op, keys: [.isExecuting, .isCancelled])
        #expect(notInterested.all.isEmpty)
        op.cancel()
        try op.start()
        #expect(late.all == ["did isFinished"], "nothing is delivered after did isFinished")
    }

    @Test func cancelledOperationReportsCancelThenFinishOnly() throws {
        let op = OpProbe()
        let changes = opRecordChanges(op, keys: [.isExecuting, .isFinished, .isCancelled])
        op.cancel()
        try op.start()
        #expect(changes.all == ["will isCancelled", "did isCancelled", "will isFinished", "did isFinished"])
    }

    @Test func deliveriesNeverOverlap() throws {
        let op = OpProbe()
        let inFlight = OpCounter()
        let overlaps = OpCounter()
        let log = OpLog<String>()
        op.observe([.queuePriority]) { _, change in
            if inFlight.increment() != 1 { overlaps.increment() }
            log.add(change.phaseAndKey)
            inFlight.decrement()
        }
        let flippers = try (0..<2).map { i in
            try OpThread.run("op-flip-\(i)") {
                for n in 0..<2_000 { op.queuePriority = (n + i) % 2 == 0 ? .high : .low }
            }
        }
        for flipper in flippers { #expect(flipper.finish()) }
        #expect(overlaps.value == 0, "one delivery at a time")
        #expect(log.count > 0)
        #expect(opProtocolViolations(log.all).isEmpty)
    }

    // Of two racing `finish()` calls only the winner delivers anything, so nothing can follow `did isFinished`.
    // Made deterministic: the first caller wins the state change, then is held inside its first delivery
    // (`will isExecuting`) while the test thread calls finish() too and must lose without delivering.
    @Test func losingFinisherDeliversNothingAfterDidIsFinished() throws {
        let op = OpManualAsync()
        try op.start()
        let log = OpLog<String>()
        let inHandler = opSemaphore()
        let release = opSemaphore()
        let held = OpFlag()
        op.observe { _, change in
            log.add(change.phaseAndKey)
            if change.phase == .will && change.key == .isExecuting, held.setFirst() {
                inHandler.signal()
                _ = release.wait(timeout: opDeadline)
            }
        }
        let winnerResult = OpBox<String?>("unset")
        let winner = try OpThread.run { winnerResult.value = opErrorCase { try op.finish() } }
        #expect(inHandler.wait(timeout: opDeadline))
        #expect(!op.isExecuting && !op.isFinished, "the held caller has claimed the finish")
        let eventsBeforeLoser = log.count
        #expect(opErrorCase { try op.finish() } == "operationAlreadyFinished", "the second caller loses")
        #expect(log.count == eventsBeforeLoser, "the loser delivered nothing")
        release.signal()
        #expect(winner.finish())
        #expect(winnerResult.value == nil, "the first caller's finish succeeded")
        #expect(op.isFinished)
        #expect(op.completions.value == 1)
        let events = log.all
        #expect(events.last == "did isFinished", "did isFinished is the last change ever delivered: \(events)")
        #expect(opProtocolViolations(events).isEmpty, "\(opProtocolViolations(events)) in \(events)")
    }

    // A start that loses to cancel() must not have reported executing. Deterministic the same way: the starting
    // thread is held in its first delivery while the test thread cancels.
    @Test func startLosingToCancelReportsNoExecuting() throws {
        let op = OpProbe()
        let log = OpLog<String>()
        let inHandler = opSemaphore()
        let release = opSemaphore()
        let held = OpFlag()
        op.observe { _, change in
            log.add(change.phaseAndKey)
            if change.phase == .will && change.key == .isExecuting, held.setFirst() {
                inHandler.signal()
                _ = release.wait(timeout: opDeadline)
            }
        }
        let starter = try OpThread.run { try? op.start() }
        let cancelled = inHandler.wait(timeout: opDeadline)
        op.cancel()
        release.signal()
        #expect(starter.finish())
        #expect(op.isFinished)
        #expect(op.completions.value == 1)
        if cancelled && op.mainRuns.value == 0 {
            let events = log.all
            #expect(!events.contains { $0.hasSuffix("isExecuting") }, "a cancelled start reported executing: \(events)")
            #expect(opProtocolViolations(events).isEmpty, "\(opProtocolViolations(events)) in \(events)")
        } else {
            // The start won (main ran): then executing was reported properly.
            #expect(opProtocolViolations(log.all).isEmpty, "\(log.all)")
        }
    }
}
