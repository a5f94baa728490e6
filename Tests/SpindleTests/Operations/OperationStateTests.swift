import CShim
import Synchronization
import Testing
@testable import Spindle

/// SEMANTICS A1–A11: the state machine of an operation run by hand (no queue).
@Suite struct OperationStateTests {
    // A1
    @Test func freshOperationIsReadyIdleAndEmpty() {
        let op = SpindleOperation()
        #expect(op.isReady)
        #expect(!op.isExecuting)
        #expect(!op.isFinished)
        #expect(!op.isCancelled)
        #expect(!op.isAsynchronous)
        #expect(op.dependencies.isEmpty)
        #expect(op.queuePriority == .normal)
        #expect(op.threadPriority == 0.5)
        #expect(op.name == nil)
        #expect(op.error == nil)
        #expect(op.completionBlock == nil)
        #expect(!op.displayName.isEmpty)
        #expect(SpindleConcurrentOperation().isAsynchronous)
        #expect(!SpindleBlockOperation().isAsynchronous)
    }

    /// Issue 19: the default name shows the object's real address (it showed `ObjectIdentifier`'s hash, seeded per
    /// process, which no debugger or allocation log would match).
    @Test func defaultDisplayNameIsTheTypeAndTheObjectsAddress() {
        for op in [SpindleOperation(), SpindleBlockOperation {}, OpProbe()] {
            let address = UInt(bitPattern: Unmanaged.passUnretained(op).toOpaque())
            let expected = "\(String(describing: type(of: op)))@0x\(String(address, radix: 16))"
            #expect(op.displayName == expected)
            #expect(op.description.hasPrefix(expected + " "))
            // Errors name it the same way.
            do {
                try op.addDependency(op)
                Issue.record("addDependency(self) did not throw")
            } catch {
                #expect(error.description == SpindleError.selfDependency(name: expected).description)
            }
        }
        #expect(SpindleBlockOperation().displayName.hasPrefix("SpindleBlockOperation@0x"))
    }

    @Test func nameIsKeptAndUsedAsDisplayName() {
        let op = SpindleOperation()
        op.name = "fetch"
        #expect(op.name == "fetch")
        #expect(op.displayName == "fetch")
        #expect("\(op)".contains("fetch"))
    }

    // A2
    @Test func startRunsMainOnceOnTheCallingThread() throws {
        let seen = OpBox<(tid: Int32, thread: SpindleThread?, executing: Bool, finished: Bool, current: Bool)>(
            (0, nil, false, true, false))
        let op = OpProbe { op in
            seen.value = (cshim_gettid(), SpindleThread.current, op.isExecuting, op.isFinished,
                          SpindleOperation.current === op)
        }
        #expect(SpindleOperation.current == nil)
        try op.start()
        #expect(op.mainRuns.value == 1)
        #expect(seen.value.tid == cshim_gettid())
        #expect(seen.value.thread === SpindleThread.current)
        #expect(seen.value.executing)
        #expect(!seen.value.finished)
        #expect(seen.value.current, "SpindleOperation.current is the operation while its main runs")
        #expect(op.isFinished)
        #expect(!op.isExecuting)
        #expect(op.completions.value == 1)
        #expect(SpindleOperation.current == nil, "the marker is cleared after main")
    }

    // A4
    @Test func startOnAFinishedOperationDoesNothing() throws {
        let op = OpProbe()
        try op.start()
        try op.start()
        try op.start()
        #expect(op.mainRuns.value == 1)
        #expect(op.completions.value == 1)
        #expect(op.isFinished)
    }

    // A5
    @Test func startWhileExecutingThrowsAndDoesNotRunMainAgain() throws {
        let entered = opSemaphore()
        let gate = opSemaphore()
        let op = OpProbe(name: "busy") { _ in
            entered.signal()
            _ = gate.wait(timeout: opDeadline)
        }
        let runner = try OpThread.run { try? op.start() }
        #expect(entered.wait(timeout: opDeadline))
        var thrown: SpindleError?
        do { try op.start() } catch let error as SpindleError { thrown = error }
        #expect(thrown.map { Mirror(reflecting: $0).children.first?.label } == "operationExecuting")
        #expect(thrown.flatMap(opErrorName) == "busy", "the error names the operation")
        #expect(op.isExecuting, "a rejected start changes nothing")
        #expect(!op.isFinished)
        gate.signal()
        #expect(runner.finish())
        #expect(op.mainRuns.value == 1)
        #expect(op.completions.value == 1)
        #expect(op.isFinished)
    }

    // A6
    @Test func startWithAnUnfinishedDependencyThrowsAndChangesNothing() throws {
        let a = OpProbe(name: "A")
        let b = OpProbe(name: "B")
        try b.addDependency(a)
        let changes = opRecordChanges(b)
        #expect(opErrorCase { try b.start() } == "operationNotReady")
        #expect(!b.isReady)
        #expect(!b.isExecuting)
        #expect(!b.isFinished)
        #expect(!b.isCancelled)
        #expect(b.mainRuns.value == 0)
        #expect(b.completions.value == 0)
        #expect(b.dependencies.map(ObjectIdentifier.init) == [ObjectIdentifier(a)])
        #expect(changes.all.isEmpty, "a rejected start emits no change: \(changes.all)")
        try a.start()
        #expect(b.isReady)
        try b.start()
        #expect(b.mainRuns.value == 1)
        #expect(b.isFinished)
    }

    // A7
    @Test func cancelledBeforeStartFinishesWithoutMainNorExecuting() throws {
        let op = OpProbe()
        let changes = opRecordChanges(op)
        op.cancel()
        try op.start()
        #expect(op.mainRuns.value == 0)
        #expect(op.isFinished)
        #expect(!op.isExecuting)
        #expect(op.isCancelled)
        #expect(op.completions.value == 1, "the completion block of a cancelled operation still runs")
        #expect(!changes.all.contains { $0.hasSuffix("isExecuting") }, "never reports executing: \(changes.all)")
        #expect(changes.all.last == "did isFinished")
        #expect(opProtocolViolations(changes.all).isEmpty)
    }

    // A8
    @Test func cancelOutsideAQueueMarksCancelledAndReadyNotFinished() {
        let op = OpProbe()
        op.cancel()
        #expect(op.isCancelled)
        #expect(op.isReady)
        #expect(!op.isFinished)
        #expect(!op.isExecuting)
        #expect(op.completions.value == 0)
        op.cancel()
        #expect(op.isCancelled && !op.isFinished, "cancelling twice changes nothing")
    }

    // A8 with a dependency (Part 1 item 6, H61)
    @Test func cancelWithAnUnfinishedDependencyMakesItReadyAndKeepsTheList() throws {
        let a = OpProbe()
        let b = OpProbe()
        try b.addDependency(a)
        #expect(!b.isReady)
        let changes = opRecordChanges(b, keys: [.isReady])
        b.cancel()
        #expect(b.isReady)
        #expect(changes.all.contains("did isReady"))
        #expect(b.dependencies.count == 1)
        try b.start()
        #expect(b.isFinished)
        #expect(b.mainRuns.value == 0)
        #expect(!a.isFinished)
    }

    // A9
    @Test func cancelOnAFinishedOperationHasNoEffect() throws {
        let op = OpProbe()
        try op.start()
        let changes = opRecordChanges(op, keys: [.isCancelled])
        op.cancel()
        #expect(!op.isCancelled)
        #expect(op.isFinished)
        #expect(changes.all.isEmpty)
    }

    // A10
    @Test func cancelWhileExecutingIsCooperative() throws {
        let entered = opSemaphore()
        let gate = opSemaphore()
        let sawCancelled = OpBox(false)
        let reachedEnd = OpBox(false)
        let op = OpProbe { op in
            entered.signal()
            _ = gate.wait(timeout: opDeadline)
            sawCancelled.value = op.isCancelled
            reachedEnd.value = true
        }
        let runner = try OpThread.run { try? op.start() }
        #expect(entered.wait(timeout: opDeadline))
        op.cancel()
        #expect(op.isCancelled, "cancel is visible at once")
        #expect(op.isExecuting, "main keeps running")
        #expect(!op.isFinished)
        gate.signal()
        #expect(runner.finish())
        #expect(sawCancelled.value)
        #expect(reachedEnd.value)
        #expect(op.isFinished)
        #expect(op.isCancelled)
        #expect(op.completions.value == 1)
        #expect(op.error == nil)
    }

    // A11: finished is terminal, so a reader that sees isFinished and then reads isExecuting must see false.
    @Test func neverExecutingAndFinishedAtOnce() throws {
        let stop = OpFlag()
        let breaches = OpCounter()
        let samples = OpCounter()
        let current = OpBox<SpindleOperation?>(nil)
        let sampler = try OpThread.run {
            while !stop.isSet {
                guard let op = current.value else { continue }
                samples.increment()
                if op.isFinished && op.isExecuting { breaches.increment() }
            }
        }
        let inside = OpCounter()
        for _ in 0..<2_000 {
            let op = OpProbe { op in if op.isFinished || !op.isExecuting { inside.increment() } }
            let changes = OpLog<Bool>()
            op.observe([.isExecuting, .isFinished]) { op, _ in changes.add(op.isExecuting && op.isFinished) }
            current.value = op
            try op.start()
            #expect(!changes.all.contains(true))
            #expect(op.isFinished && !op.isExecuting)
        }
        stop.set()
        #expect(sampler.finish())
        #expect(breaches.value == 0)
        #expect(inside.value == 0, "inside main: executing and not finished")
        #expect(samples.value > 0)
    }
}
