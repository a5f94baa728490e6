import Glibc
import Testing
@testable import Spindle

private typealias Key = SpindleOperation.Key
private typealias Change = SpindleOperation.Change
private typealias ObservedValue = SpindleOperation.ObservedValue

/// One delivery: the change and the thread it was delivered on.
private struct Delivery: Sendable {
    let change: Change
    let thread: pthread_t
}

/// Records every change delivered to one observer, with its thread.
private func record(_ op: SpindleOperation, keys: Set<Key> = Set(Key.allCases),
                    options: SpindleOperation.ObservingOptions = []) -> OpLog<Delivery> {
    let log = OpLog<Delivery>()
    op.observe(keys, options: options) { _, change in log.add(Delivery(change: change, thread: pthread_self())) }
    return log
}

/// The descriptions ("will isExecuting: false → true", …) of the recorded changes.
private func described(_ log: OpLog<Delivery>) -> [String] { log.all.map { "\($0.change)" } }

/// The six changes of a run that is started and finishes without being cancelled.
private let runChanges = [
    "will isExecuting: false → true", "did isExecuting: false → true",
    "will isExecuting: true → false", "did isExecuting: true → false",
    "will isFinished: false → true", "did isFinished: false → true",
]

/// Issue 19: each change carries the old and new values of its key, typed, as they were at that change.
@Suite struct OperationObservedValueTests {
    @Test func manualStartCarriesOldAndNewOfEveryChange() throws {
        let op = OpProbe(name: "manual")
        let log = record(op)
        try op.start()
        #expect(described(log) == runChanges)
        for change in log.all.map(\.change) {
            #expect(!change.isInitial)
            #expect(change.oldValue?.boolValue == !(change.newValue.boolValue ?? true), "\(change)")
            #expect(change.newValue.priorityValue == nil && change.newValue.dependenciesValue == nil)
        }
        #expect(opProtocolViolations(log.all.map(\.change.phaseAndKey)).isEmpty)
    }

    @Test func queuedRunCarriesOldAndNewOfEveryChange() throws {
        let queue = try SpindleOperationQueue(name: "observed-values", maxConcurrentOperationCount: 1)
        let a = OpProbe(name: "a")
        let b = OpProbe(name: "b")
        let log = record(b)
        try b.addDependency(a)
        b.queuePriority = .high
        try queue.addOperation(b)
        try queue.addOperation(a)
        #expect(try b.waitUntilFinished(timeout: opDeadline))
        #expect(described(log) == [
            "will dependencies: [] → [a]", "did dependencies: [] → [a]",
            "will isReady: true → false", "did isReady: true → false",
            "will queuePriority: normal → high", "did queuePriority: normal → high",
            "will isReady: false → true", "did isReady: false → true",
        ] + runChanges)
        let priority = log.all.map(\.change).first { $0.key == .queuePriority }
        #expect(priority?.oldValue == .priority(.normal) && priority?.newValue == .priority(.high))
        #expect(try queue.waitUntilAllOperationsAreFinished(timeout: opDeadline))
    }

    @Test func cancelBeforeStartCarriesValues() throws {
        let dependency = OpProbe(name: "dependency")
        let op = OpProbe(name: "cancelled")
        try op.addDependency(dependency)
        let log = record(op)
        op.cancel()
        try op.start()
        #expect(described(log) == [
            "will isCancelled: false → true", "did isCancelled: false → true",
            "will isReady: false → true", "did isReady: false → true",
            "will isFinished: false → true", "did isFinished: false → true",
        ])
        #expect(op.mainRuns.value == 0)
    }

    @Test func cancelDuringMainCarriesValues() throws {
        let started = OracleSemaphore()
        let go = OracleSemaphore()
        let op = OpProbe(name: "running") { _ in
            started.post()
            _ = go.wait()
        }
        let log = record(op)
        let runner = try OpThread.run { try? op.start() }
        #expect(started.wait())
        op.cancel()
        go.post()
        #expect(runner.finish())
        #expect(described(log) == [
            "will isExecuting: false → true", "did isExecuting: false → true",
            "will isCancelled: false → true", "did isCancelled: false → true",
            "will isExecuting: true → false", "did isExecuting: true → false",
            "will isFinished: false → true", "did isFinished: false → true",
        ])
    }

    @Test func priorityChangesCarryEachOldAndNew() {
        let op = OpProbe()
        let log = record(op, keys: [.queuePriority])
        op.queuePriority = .high
        op.queuePriority = .high  // no change: nothing delivered
        op.queuePriority = .veryLow
        op.queuePriority = .normal
        #expect(described(log) == [
            "will queuePriority: normal → high", "did queuePriority: normal → high",
            "will queuePriority: high → veryLow", "did queuePriority: high → veryLow",
            "will queuePriority: veryLow → normal", "did queuePriority: veryLow → normal",
        ])
        let dids = log.all.map(\.change).filter { $0.phase == .did }
        #expect(dids.map(\.oldValue?.priorityValue) == [.normal, .high, .veryLow])
        #expect(dids.map(\.newValue.priorityValue) == [.high, .veryLow, .normal])
    }

    @Test func dependencyChangesCarryTheListBeforeAndAfter() throws {
        let a1 = OpProbe(name: "a1")
        let a2 = OpProbe(name: "a2")
        let done = OpProbe(name: "done")
        try done.start()
        let stranger = OpProbe(name: "stranger")
        let b = OpProbe(name: "b")
        let log = record(b, keys: [.dependencies, .isReady])
        try b.addDependency(a1)
        try b.addDependency(a2)
        try b.addDependency(a1)  // already listed: no change
        b.removeDependency(stranger)  // not listed: no change
        b.removeDependency(a1)
        try b.addDependency(done)  // finished: listed, does not hold it back
        b.removeDependency(a2)
        #expect(described(log) == [
            "will dependencies: [] → [a1]", "did dependencies: [] → [a1]",
            "will isReady: true → false", "did isReady: true → false",
            "will dependencies: [a1] → [a1, a2]", "did dependencies: [a1] → [a1, a2]",
            "will dependencies: [a1, a2] → [a2]", "did dependencies: [a1, a2] → [a2]",
            "will dependencies: [a2] → [a2, done]", "did dependencies: [a2] → [a2, done]",
            "will dependencies: [a2, done] → [done]", "did dependencies: [a2, done] → [done]",
            "will isReady: false → true", "did isReady: false → true",
        ])
        // The values are the operations themselves, by identity.
        let second = log.all.map(\.change).first { $0.phase == .did && $0.newValue.dependenciesValue?.count == 2 }
        let ids = second?.newValue.dependenciesValue?.map(ObjectIdentifier.init)
        #expect(ids == [ObjectIdentifier(a1), ObjectIdentifier(a2)])
        #expect(second?.oldValue == .dependencies([a1]))
    }

    @Test func initialDeliversTheCurrentValuesOnTheCallingThreadFirst() throws {
        let dependency = OpProbe(name: "dependency")
        let op = OpProbe(name: "observed")
        try op.addDependency(dependency)
        op.queuePriority = .high
        let log = record(op, options: .initial)
        #expect(described(log) == [
            "initial isReady: false", "initial isExecuting: false", "initial isFinished: false",
            "initial isCancelled: false", "initial queuePriority: high", "initial dependencies: [dependency]",
        ], "delivered before observe returned")
        #expect(log.all.allSatisfy { pthread_equal($0.thread, pthread_self()) != 0 }, "on the calling thread")
        #expect(log.all.allSatisfy { $0.change.isInitial && $0.change.phase == .did && $0.change.oldValue == nil })
        let subset = record(op, keys: [.queuePriority, .isCancelled], options: [.initial])
        #expect(described(subset) == ["initial isCancelled: false", "initial queuePriority: high"])
        try dependency.start()
        try op.start()
        // The first change of each key starts from the initial value.
        #expect(Array(described(log).dropFirst(6)) == [
            "will isReady: false → true", "did isReady: false → true",
        ] + runChanges)
        #expect(described(subset).count == 2)
    }

    @Test func initialOnAFinishedOperationComesBeforeTheLateDidIsFinished() throws {
        let op = OpProbe(name: "ended")
        try op.start()
        let withInitial = record(op, options: .initial)
        let plain = record(op)
        #expect(described(withInitial) == [
            "initial isReady: true", "initial isExecuting: false", "initial isFinished: true",
            "initial isCancelled: false", "initial queuePriority: normal", "initial dependencies: []",
            "did isFinished: false → true",
        ])
        #expect(described(plain) == ["did isFinished: false → true"])
        // Nothing follows did isFinished, for observers registered after the end too.
        op.queuePriority = .veryHigh
        try op.addDependency(OpProbe())
        op.cancel()
        #expect(withInitial.count == 7 && plain.count == 1)
    }

    // While another thread is delivering this operation's changes, the initial values are handed to that thread:
    // delivered by it, before any later change to the new observer.
    @Test func initialDuringAnotherThreadsDeliveryComesFirstFromThatThread() throws {
        let op = OpProbe()
        let inHandler = OracleSemaphore()
        let release = OracleSemaphore()
        let held = OpFlag()
        let first = record(op, keys: [.queuePriority])
        op.observe([.queuePriority]) { _, _ in
            if held.setFirst() {
                inHandler.post()
                _ = release.wait()
            }
        }
        let setterThread = OpBox<pthread_t?>(nil)
        let setter = try OpThread.run {
            setterThread.value = pthread_self()
            op.queuePriority = .high
        }
        #expect(inHandler.wait())
        let late = record(op, keys: [.queuePriority], options: .initial)
        #expect(late.count == 0, "handed to the delivering thread, not delivered here")
        op.queuePriority = .low  // recorded while the setter still delivers: it delivers this too
        #expect(late.count == 0)
        release.post()
        #expect(setter.finish())
        #expect(described(late) == [
            "initial queuePriority: high",
            "will queuePriority: high → low", "did queuePriority: high → low",
        ])
        let thread = try #require(setterThread.value)
        #expect(late.all.allSatisfy { pthread_equal($0.thread, thread) != 0 })
        #expect(described(first) == [
            "will queuePriority: normal → high", "did queuePriority: normal → high",
            "will queuePriority: high → low", "did queuePriority: high → low",
        ])
    }

    // From a handler, the initial values are queued behind the delivery in progress: delivered by the same thread
    // once the handler (and the rest of its batch) has returned, with the value at registration.
    @Test func initialFromAHandlerComesAfterItReturns() {
        let op = OpProbe()
        let log = OpLog<String>()
        let registered = OpFlag()
        op.observe([.queuePriority]) { op, change in
            log.add("A \(change.phaseAndKey)")
            if registered.setFirst() {
                op.observe([.queuePriority], options: .initial) { _, change in log.add("B \(change)") }
                log.add("A registered")
            }
        }
        op.queuePriority = .high
        #expect(log.all == [
            "A will queuePriority", "A registered", "A did queuePriority", "B initial queuePriority: high",
        ])
        op.queuePriority = .low
        #expect(log.all.suffix(4) == [
            "A will queuePriority", "B will queuePriority: high → low",
            "A did queuePriority", "B did queuePriority: high → low",
        ])
    }

    // A handler held on one thread while the operation moves on: each delivery still carries the values of its
    // own change, not the current ones.
    @Test func lateDeliveryCarriesTheValuesOfEachChangeNotTheCurrentOnes() throws {
        let op = OpProbe(name: "moving")
        let inHandler = OracleSemaphore()
        let release = OracleSemaphore()
        let held = OpFlag()
        let atDelivery = OpLog<String>()
        let log = record(op)
        op.observe { op, change in
            if change.key == .queuePriority && change.phase == .did { atDelivery.add("\(op.queuePriority)") }
            if change.phase == .did && change.key == .isExecuting && held.setFirst() {
                inHandler.post()
                _ = release.wait()
            }
        }
        let runner = try OpThread.run { try? op.start() }
        #expect(inHandler.wait())
        let dependency = OpProbe(name: "d")
        op.queuePriority = .high
        op.queuePriority = .low
        op.queuePriority = .veryHigh
        try op.addDependency(dependency)  // listed, does not hold back a started operation
        op.cancel()
        #expect(op.mainRuns.value == 0, "main waits for the delivery to return")
        release.post()
        #expect(runner.finish())
        #expect(described(log) == [
            "will isExecuting: false → true", "did isExecuting: false → true",
            "will queuePriority: normal → high", "did queuePriority: normal → high",
            "will queuePriority: high → low", "did queuePriority: high → low",
            "will queuePriority: low → veryHigh", "did queuePriority: low → veryHigh",
            "will dependencies: [] → [d]", "did dependencies: [] → [d]",
            "will isCancelled: false → true", "did isCancelled: false → true",
            "will isExecuting: true → false", "did isExecuting: true → false",
            "will isFinished: false → true", "did isFinished: false → true",
        ])
        #expect(atDelivery.all == ["veryHigh", "veryHigh", "veryHigh"], "the property had moved on at delivery")
        #expect(log.all.dropFirst(2).allSatisfy { pthread_equal($0.thread, log.all[0].thread) != 0 },
                "the held thread delivered the changes made meanwhile")
    }

    // Racing sets on an observed operation are recorded under the lock that makes them: the delivered changes form
    // one chain from the initial value to the final one.
    @Test func racingPrioritySetsAreDeliveredAsAChain() throws {
        let op = OpProbe()
        let log = record(op, keys: [.queuePriority], options: .initial)
        let levels: [SpindleOperation.QueuePriority] = [.veryLow, .low, .normal, .high, .veryHigh]
        let setters = try (0..<2).map { i in
            try OpThread.run("op-prio-\(i)") {
                for n in 0..<1_000 { op.queuePriority = levels[(n * (i + 2)) % levels.count] }
            }
        }
        for setter in setters { #expect(setter.finish()) }
        let changes = log.all.map(\.change)
        #expect(changes.first?.isInitial == true)
        var current = changes.first?.newValue
        var broken = 0
        for change in changes.dropFirst() where change.phase == .did {
            if change.oldValue != current || change.oldValue == change.newValue { broken += 1 }
            current = change.newValue
        }
        #expect(broken == 0, "a did whose old value is not the previous new value")
        #expect(current == .priority(op.queuePriority))
        #expect(opProtocolViolations(changes.dropFirst().map(\.phaseAndKey)).isEmpty)
    }

    @Test func valuesCompareAndPrint() {
        let a = OpProbe(name: "a"), b = OpProbe(name: "b")
        #expect(ObservedValue.dependencies([a, b]) == .dependencies([a, b]))
        #expect(ObservedValue.dependencies([a, b]) != .dependencies([b, a]))
        #expect(ObservedValue.dependencies([a]) != .dependencies([OpProbe(name: "a")]), "by identity, not name")
        #expect(ObservedValue.bool(false) != .priority(.normal))
        #expect(Set<ObservedValue>([.bool(true), .bool(true), .priority(.low)]).count == 2)
        #expect(ObservedValue.dependencies([a, b]).hashValue == ObservedValue.dependencies([a, b]).hashValue)
        #expect(ObservedValue.bool(true).boolValue == true && ObservedValue.bool(true).priorityValue == nil)
        #expect(ObservedValue.priority(.low).priorityValue == .low && ObservedValue.priority(.low).boolValue == nil)
        let six = (1...6).map { OpProbe(name: "op\($0)") }
        #expect("\(ObservedValue.dependencies(six))" == "[op1, op2, op3, op4, +2 more]")
        #expect("\(ObservedValue.dependencies([]))" == "[]")
    }

    // The calls written before values existed: observe with and without keys, trailing or not, phase and key,
    // the description's "phase key" head, removeObserver.
    @Test func existingObserveCallersStillCompile() throws {
        let op = OpProbe()
        let wills = OpCounter()
        let dids = OpCounter()
        let heads = OpLog<Bool>()
        op.observe { _, change in
            switch change.phase {
            case .will: wills.increment()
            case .did: dids.increment()
            }
            heads.add("\(change)".hasPrefix("\(change.phase) \(change.key)"))
        }
        let finished = OpCounter()
        let registration: SpindleOperation.Observation = op.observe([.isFinished], { _, change in
            if change.phase == .did && change.key == .isFinished { finished.increment() }
        })
        let removed = op.observe(Set(Key.allCases)) { _, _ in Issue.record("removed observer called") }
        op.removeObserver(removed)
        try op.start()
        op.removeObserver(registration)
        #expect(wills.value == 3 && dids.value == 3)
        #expect(heads.all.count == 6 && heads.all.allSatisfy { $0 })
        #expect(finished.value == 1)
    }
}
