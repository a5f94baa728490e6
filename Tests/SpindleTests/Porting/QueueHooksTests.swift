import Testing

@testable import Spindle

// Issue 22: a queue's hooks (`SpindleOperationQueueHooks`), the port of an `OperationQueue` subclass and of the
// "Advanced NSOperations" queue delegate. Nothing sleeps as synchronisation: operations meet the test on semaphores
// with generous deadlines; only weak references are polled (`qtWaitUntil`).

/// One hook call: which hook, for which operation (held, so identities are never reused), on which queue (by
/// identity: holding it would make a cycle through the queue's own hooks) and thread, and what the hook saw.
private struct HookEvent: Sendable {
    enum Kind: String, Sendable { case willAdd, didAdd, willStart, didFinish }
    let kind: Kind
    let op: SpindleOperation
    let queue: ObjectIdentifier
    let tid: Int32
    /// didFinish: the error handed to the hook, as text.
    let error: String?
    let wasCancelled: Bool
    let wasFinished: Bool
}

/// Records every hook call of the queues it is set on.
private final class HookRecorder: Sendable {
    let events = OpLog<HookEvent>()

    var hooks: SpindleOperationQueueHooks {
        SpindleOperationQueueHooks(
            willAdd: { queue, op in self.record(.willAdd, queue, op) },
            didAdd: { queue, op in self.record(.didAdd, queue, op) },
            willStart: { queue, op in self.record(.willStart, queue, op) },
            didFinish: { queue, op, error in self.record(.didFinish, queue, op, error.map { "\($0)" }) })
    }

    private func record(_ kind: HookEvent.Kind, _ queue: SpindleOperationQueue, _ op: SpindleOperation,
                        _ error: String? = nil) {
        self.events.add(HookEvent(kind: kind, op: op, queue: ObjectIdentifier(queue), tid: qtTid(), error: error,
                                  wasCancelled: op.isCancelled, wasFinished: op.isFinished))
    }

    /// The events of `op`, in the order they happened.
    func events(of op: SpindleOperation) -> [HookEvent] { self.events.all.filter { $0.op === op } }

    /// The kinds of `op`'s events, in order.
    func kinds(of op: SpindleOperation) -> [HookEvent.Kind] { self.events(of: op).map(\.kind) }

    /// Every operation any hook was told of, each once, in the order first told.
    var operations: [SpindleOperation] {
        var seen: [SpindleOperation] = []
        for event in self.events.all where !seen.contains(where: { $0 === event.op }) { seen.append(event.op) }
        return seen
    }
}

/// A condition that always fails.
private struct NeverMet: SpindleOperationCondition {
    struct Refused: Error {}
    func evaluate(for operation: SpindleOperation) -> SpindleConditionResult { .failed(Refused()) }
}

/// A condition that always passes (to see that `willAdd` may still add one).
private struct AlwaysMet: SpindleOperationCondition {
    func evaluate(for operation: SpindleOperation) -> SpindleConditionResult { .satisfied }
}

/// Whether one operation's events are each hook once, `willAdd` first and `willStart` before `didFinish` (`didAdd`
/// may come anywhere after `willAdd`: the operation can run before the adding thread gets to it).
private func isToldOnceInOrder(_ kinds: [HookEvent.Kind]) -> Bool {
    guard kinds.count == 4, Set(kinds) == [.willAdd, .didAdd, .willStart, .didFinish], kinds.first == .willAdd,
        let start = kinds.firstIndex(of: .willStart), let finish = kinds.firstIndex(of: .didFinish)
    else { return false }
    return start < finish
}

@Suite struct QueueHooksTests {
    // MARK: - Every entry

    /// Each public add entry tells each operation `willAdd`, `didAdd`, `willStart` and `didFinish` exactly once,
    /// with `willAdd` first and `willStart` before `didFinish`, on the queue the operation was added to.
    @Test func everyAddEntryTellsEachOperationAddStartAndFinishOnce() async throws {
        let queue = try SpindleOperationQueue(name: "hooks-entries", maxConcurrentOperationCount: 2)
        let recorder = HookRecorder()
        queue.hooks = recorder.hooks
        var added: [SpindleOperation] = []

        let single = qtNamed("single")
        try queue.addOperation(single)
        let batch = [qtNamed("batch-1"), qtNamed("batch-2")]
        try queue.addOperations(batch)
        let waited = qtNamed("waited")
        try queue.addOperations([waited], waitUntilFinished: true)
        #expect(recorder.kinds(of: waited).contains(.didFinish), "didFinish came after the batch wait returned")
        let block = queue.addOperation {}
        let barrier = queue.addBarrierBlock {}
        let until = qtNamed("until")
        try queue.addOperation(until, until: .after(.seconds(qtDeadline)))
        let timeout = qtNamed("timeout")
        try queue.addOperation(timeout, timeout: .seconds(qtDeadline))
        let timedBatch = [qtNamed("timed-1"), qtNamed("timed-2")]
        try queue.addOperations(timedBatch, until: .after(.seconds(qtDeadline)))
        added += [single] + batch + [waited, block, barrier, until, timeout] + timedBatch
        #expect(try queue.addOperationAndWait { 7 } == 7)
        let room = qtNamed("room")
        try await queue.addOperationWhenRoom(room)
        let roomBatch = [qtNamed("room-1"), qtNamed("room-2")]
        try await queue.addOperationsWhenRoom(roomBatch)
        added += [room] + roomBatch
        #expect(try await queue.run { 8 } == 8)
        try await queue.waitUntilAllOperationsAreFinished()

        let told = recorder.operations
        #expect(told.count == added.count + 2, "addOperationAndWait and run add one operation each")
        for op in added { #expect(told.contains { $0 === op }, "\(op.displayName) was never told") }
        for op in told {
            let kinds = recorder.kinds(of: op)
            #expect(isToldOnceInOrder(kinds), "\(op.displayName): \(kinds)")
            #expect(recorder.events(of: op).allSatisfy { $0.queue == ObjectIdentifier(queue) })
            let finish = recorder.events(of: op).first { $0.kind == .didFinish }
            #expect(finish?.wasFinished == true && finish?.error == nil && finish?.wasCancelled == false)
        }
    }

    // MARK: - Bounded queues and refused adds

    /// A full `.callerRuns` queue runs the operation on the adding thread: its hooks come there, start and finish
    /// before `didAdd`. A refused add (full `.reject` queue, a timed add that times out, an operation already in a
    /// queue, a shut-down queue) is told `willAdd` only, and the operation is left as it was.
    @Test func callerRunsIsToldOnTheAddingThreadAndRefusedAddsOnlyWillAdd() throws {
        let queue = try SpindleOperationQueue(name: "hooks-bounded", maxConcurrentOperationCount: 1, capacity: 1,
                                              whenFull: .callerRuns)
        let recorder = HookRecorder()
        queue.hooks = recorder.hooks
        queue.isSuspended = true
        let held = qtNamed("held")
        try queue.addOperation(held)  // the queue is full now
        let extra = qtNamed("extra")
        try queue.addOperation(extra)
        #expect(extra.isFinished)
        #expect(recorder.kinds(of: extra) == [.willAdd, .willStart, .didFinish, .didAdd])
        #expect(recorder.events(of: extra).allSatisfy { $0.tid == qtTid() && $0.queue == ObjectIdentifier(queue) })

        try queue.setCapacity(1, whenFull: .reject)
        let rejected = qtNamed("rejected")
        qtExpectError(.queueFull(name: "hooks-bounded", capacity: 1)) { try queue.addOperation(rejected) }
        let late = qtNamed("late")
        qtExpectError(.queueFull(name: "hooks-bounded", capacity: 1)) { try queue.addOperation(late, timeout: .zero) }
        qtExpectError(.operationAlreadyInQueue(name: "held")) { try queue.addOperation(held) }
        #expect(recorder.kinds(of: rejected) == [.willAdd] && recorder.kinds(of: late) == [.willAdd])
        #expect(!rejected.isFinished && !rejected.isExecuting && !late.isFinished)
        #expect(recorder.kinds(of: held) == [.willAdd, .didAdd, .willAdd])

        queue.isSuspended = false
        qtDrain(queue)
        #expect(recorder.kinds(of: held) == [.willAdd, .didAdd, .willAdd, .willStart, .didFinish])

        queue.shutdown()
        let refusedBlock = queue.addOperation {}
        #expect(refusedBlock.isFinished && refusedBlock.isCancelled)
        let refused = qtNamed("after-shutdown")
        qtExpectError(.queueShutDown(name: "hooks-bounded")) { try queue.addOperation(refused) }
        #expect(recorder.kinds(of: refusedBlock) == [.willAdd] && recorder.kinds(of: refused) == [.willAdd])
        #expect(!refused.isFinished)
    }

    // MARK: - Finished unrun

    /// An operation that finishes without running (cancelled before the queue reached it, a failed condition,
    /// `shutdown(.cancel)`) is told `didFinish`, cancelled, and never `willStart`; a failing one gets its error.
    @Test func operationsFinishedUnrunAreToldDidFinishButNotWillStart() throws {
        let queue = try SpindleOperationQueue(name: "hooks-unrun", maxConcurrentOperationCount: 1)
        let recorder = HookRecorder()
        queue.hooks = recorder.hooks
        queue.isSuspended = true
        let cancelled = qtNamed("cancelled")
        let plain = qtNamed("plain")
        let failing = BTThrowingOp(code: 3, name: "failing")
        let refused = qtNamed("refused")
        try refused.addCondition(NeverMet())
        try queue.addOperations([cancelled, plain, failing, refused])
        cancelled.cancel()
        queue.isSuspended = false
        qtDrain(queue)

        #expect(recorder.kinds(of: cancelled) == [.willAdd, .didAdd, .didFinish])
        #expect(recorder.kinds(of: plain) == [.willAdd, .didAdd, .willStart, .didFinish])
        #expect(recorder.kinds(of: failing) == [.willAdd, .didAdd, .willStart, .didFinish])
        #expect(recorder.kinds(of: refused) == [.willAdd, .didAdd, .didFinish])
        let finish = { (op: SpindleOperation) in recorder.events(of: op).last! }
        #expect(finish(cancelled).wasCancelled && finish(cancelled).error == nil)
        #expect(!finish(plain).wasCancelled && finish(plain).error == nil)
        #expect(finish(failing).error == "\(BTError(code: 3))")
        #expect(finish(refused).wasCancelled && finish(refused).error?.contains("Refused") == true)

        queue.isSuspended = true
        let pending = (0..<3).map { qtNamed("pending-\($0)") }
        try queue.addOperations(pending)
        queue.shutdown(.cancel)
        #expect(try queue.awaitTermination(timeout: .seconds(qtDeadline)))
        for op in pending {
            #expect(recorder.kinds(of: op) == [.willAdd, .didAdd, .didFinish], "\(op.displayName)")
            #expect(finish(op).wasCancelled && finish(op).wasFinished)
        }
    }

    // MARK: - Order and locks

    /// `didFinish` comes once the operation is finished and its observers were told, before its completion block,
    /// its dependents and its waiters, while the queue still counts it; it can take the queue's lock (no lock of
    /// ours is held), and waiting for itself or its queue from there throws instead of deadlocking.
    @Test func didFinishComesAfterObserversAndBeforeCompletionDependentsAndWaiters() throws {
        let queue = try SpindleOperationQueue(name: "hooks-order", maxConcurrentOperationCount: 2)
        let log = OpLog<String>()
        let first = qtNamed("first") { log.add("main") }
        let dependent = qtNamed("dependent") { log.add("dependent main") }
        try dependent.addDependency(first)
        first.completionBlock = { log.add("completion") }
        first.observe([.isFinished]) { _, change in if change.phase == .did { log.add("observer") } }
        queue.hooks = SpindleOperationQueueHooks(didFinish: { queue, op, _ in
            guard op.name == "first" else { return }
            log.add("didFinish: finished \(op.isFinished), counted \(queue.operationCount)")
            log.add("wait on self: \(opErrorCase { try op.waitUntilFinished() } ?? "none")")
            log.add("wait on queue: \(opErrorCase { try queue.waitUntilAllOperationsAreFinished() } ?? "none")")
        })
        try queue.addOperations([first, dependent])
        try first.waitUntilFinished()
        #expect(log.all.contains("didFinish: finished true, counted 2"), "the hook must return before the waiters")
        qtDrain(queue)
        #expect(log.all == [
            "main", "observer", "didFinish: finished true, counted 2", "wait on self: waitOnSelf",
            "wait on queue: waitOnOwnQueue", "completion", "dependent main",
        ])
    }

    /// Every hook may call back into the queue and the operation (locks of ours would deadlock or trap here), and
    /// may add work to the same queue; `willStart` runs on the worker, where a wait for the queue throws.
    @Test func hooksRunOutsideOurLocksAndMayAddWork() throws {
        let queue = try SpindleOperationQueue(name: "hooks-reentry", maxConcurrentOperationCount: 1)
        let log = OpLog<String>()
        let followUps = OpLog<SpindleOperation>()
        let probe: @Sendable (String, SpindleOperationQueue, SpindleOperation) -> Void = { hook, queue, op in
            // The queue's lock (three ways) and the operation's.
            let counts = (queue.snapshot().operationCount, queue.operations.count, queue.operationCount)
            log.add("\(hook) \(op.displayName): \(counts), \(op.dependencies.count) dependencies")
        }
        queue.hooks = SpindleOperationQueueHooks(
            willAdd: { probe("willAdd", $0, $1) },
            didAdd: { queue, op in
                probe("didAdd", queue, op)
                if op.name == "parent" { followUps.add(queue.addOperation { log.add("follow-up ran") }) }
            },
            willStart: { queue, op in
                probe("willStart", queue, op)
                if op.name == "parent" {
                    log.add("willStart wait: \(opErrorCase { try queue.waitUntilAllOperationsAreFinished() } ?? "none")")
                }
            },
            didFinish: { queue, op, _ in probe("didFinish", queue, op) })
        let parent = qtNamed("parent")
        try queue.addOperation(parent)
        qtDrain(queue)
        #expect(followUps.count == 1 && followUps.all[0].isFinished)
        #expect(log.all.contains("follow-up ran"))
        #expect(log.all.contains("willStart wait: waitOnOwnQueue"))
        #expect(log.all.filter { $0.hasPrefix("didFinish") }.count == 2)
    }

    /// `willAdd` sees the operation before the queue does: it may still add a dependency and a condition (as a queue
    /// subclass's `addOperation` override did), and they hold.
    @Test func willAddMayStillChangeTheOperation() throws {
        let queue = try SpindleOperationQueue(name: "hooks-will-add", maxConcurrentOperationCount: 2)
        let gate = qtNamed("gate")
        let conditionAdded = OpFlag()
        queue.hooks = SpindleOperationQueueHooks(willAdd: { _, op in
            guard op.name == "guarded" else { return }
            try? op.addDependency(gate)
            if (try? op.addCondition(AlwaysMet())) != nil { conditionAdded.set() }
            op.queuePriority = .high
        })
        let guarded = qtNamed("guarded")
        try queue.addOperation(guarded)
        #expect(conditionAdded.isSet)
        #expect(guarded.dependencies.count == 1 && guarded.queuePriority == .high)
        #expect(!guarded.isReady && !guarded.isFinished, "it must wait for the dependency its willAdd added")
        try gate.start()
        #expect(try guarded.waitUntilFinished(timeout: .seconds(qtDeadline)))
        #expect(!guarded.isCancelled)
        qtDrain(queue)
    }

    // MARK: - Setting

    /// `hooks` reads back what was set; hooks with no closure are no hooks; setting nil stops every event.
    @Test func hooksReadBackAndEmptyHooksAreNone() throws {
        let queue = SpindleOperationQueue(name: "hooks-settings")
        #expect(queue.hooks == nil)
        let recorder = HookRecorder()
        queue.hooks = recorder.hooks
        #expect(queue.hooks?.didFinish != nil && queue.hooks?.willAdd != nil)
        queue.hooks = SpindleOperationQueueHooks()
        #expect(queue.hooks == nil && SpindleOperationQueueHooks().isEmpty)
        try queue.addOperation(qtNamed("untold"))
        qtDrain(queue)
        #expect(recorder.events.count == 0)
    }

    /// Hooks replaced and cleared from one thread while two others add and the workers run: no event is told twice,
    /// the hooks set last are told everything after the set, none after clearing, and every hooks value replaced is
    /// released (its captures freed).
    @Test func hooksCanBeReplacedFromAnyThreadWhileOperationsRun() throws {
        let queue = try SpindleOperationQueue(name: "hooks-race", maxConcurrentOperationCount: 2)
        let events = OpLog<(HookEvent.Kind, ObjectIdentifier)>()
        let freed = QTGate()
        let made = OpCounter()
        @Sendable func makeHooks() -> SpindleOperationQueueHooks {
            let sentinel = QTReleaseSentinel(freed)
            made.increment()
            return SpindleOperationQueueHooks(
                willAdd: { _, op in _ = sentinel; events.add((.willAdd, ObjectIdentifier(op))) },
                didAdd: { _, op in events.add((.didAdd, ObjectIdentifier(op))) },
                willStart: { _, op in events.add((.willStart, ObjectIdentifier(op))) },
                didFinish: { _, op, _ in events.add((.didFinish, ObjectIdentifier(op))) })
        }
        let ops = OpLog<SpindleOperation>()  // kept alive, so identities are not reused
        let setter = try BTThread("hooks-setter") {
            for i in 0..<300 { queue.hooks = i % 3 == 2 ? nil : makeHooks() }
        }
        let adders = try (0..<2).map { t in
            try BTThread("hooks-adder-\(t)") {
                for _ in 0..<1000 { ops.add(queue.addOperation {}) }
            }
        }
        #expect(setter.join())
        for adder in adders { #expect(adder.join()) }
        qtDrain(queue)
        var seen: [String: Int] = [:]
        for (kind, id) in events.all { seen["\(kind) \(UInt(bitPattern: id))", default: 0] += 1 }
        #expect(seen.values.allSatisfy { $0 == 1 }, "an event was told twice")

        queue.hooks = makeHooks()
        let after = (0..<50).map { qtNamed("after-\($0)") }
        try queue.addOperations(after)
        qtDrain(queue)
        let told = events.all
        for op in after {
            let kinds = told.filter { $0.1 == ObjectIdentifier(op) }.map(\.0)
            #expect(isToldOnceInOrder(kinds), "\(op.displayName): \(kinds)")
        }
        queue.hooks = nil
        let before = events.count
        try queue.addOperations((0..<50).map { qtNamed("untold-\($0)") })
        qtDrain(queue)
        #expect(events.count == before)
        for _ in 0..<made.value { #expect(freed.wait(), "a replaced hooks value was never released") }
        withExtendedLifetime(ops) {}
    }

    /// Hooks keep neither their queue alive (they are handed it; the slot's reference is the queue's own) nor their
    /// captures once the queue is gone.
    @Test func hooksKeepNeitherTheQueueNorTheirCapturesAlive() throws {
        let freed = QTGate()
        let weak = try Self.queueWithHooksDrainedAndReleased(freed)
        #expect(qtWaitUntil { weak.isGone }, "the queue was not freed")
        #expect(freed.wait(), "the hooks' captures were not freed with the queue")
    }

    @inline(never)
    private static func queueWithHooksDrainedAndReleased(_ freed: QTGate) throws -> QTWeak<SpindleOperationQueue> {
        let queue = try SpindleOperationQueue(name: "hooks-lifetime", maxConcurrentOperationCount: 1)
        let sentinel = QTReleaseSentinel(freed)
        queue.hooks = SpindleOperationQueueHooks(didFinish: { queue, _, _ in _ = (sentinel, queue.name) })
        try queue.addOperation(qtNamed("one"))
        qtDrain(queue)
        return QTWeak(queue)
    }
}
