import Glibc
import Synchronization
import Testing

@testable import Spindle

/// A review of the queue's runtime controls (width, priority, suspension, cancel-all, barriers, batch waits,
/// statistics) and how they interleave with running work (2026-11-26). Each test here failed on the code it was
/// written against; none sleeps as synchronisation (POSIX semaphores with generous deadlines, polling only for
/// facts with no signal).
@Suite("Review of the queue's runtime controls", .timeLimit(.minutes(2))) struct QueueControlsReviewTests {
    /// Whether `op` is reserved by a worker now (under the queue's lock).
    static func isReserved(_ op: SpindleOperation, in queue: SpindleOperationQueue) -> Bool {
        queue.core.lock.withLock { op.placement == .reserved }
    }

    // MARK: - C1: a priority raised on a reserved operation is not seen when another worker's slot frees

    /// Width 2. Worker 1 takes A (a long operation) with a backlog of 40 and reserves the next 7 (N1…N7). N5 is
    /// then raised to veryHigh ("a priority changed while waiting takes effect": SEMANTICS 8, item 49). Worker 2's
    /// slot frees (B returns): the first operation it starts should be N5, the only veryHigh one ready. It starts
    /// N8 (normal) instead: `priorityChanged` only bumps `batchEpoch`, which only the reservation's owner reads (it
    /// is inside A), and worker 2's stall check returns worker 1's reservation only on its second take.
    @Test(qtOwnThreadsOnly) func priorityRaisedOnAReservedOperationWinsTheNextFreeSlot() throws {
        let queue = try SpindleOperationQueue(name: "review-C1", maxConcurrentOperationCount: 2)
        let bStarted = QTGate(), bGo = QTGate(), aStarted = QTGate(), aGo = QTGate()
        let log = QTLog<String>()
        try queue.addOperation(qtNamed("B") {
            bStarted.open()
            bGo.wait()
        })
        #expect(bStarted.wait(), "B started")
        let a = qtNamed("A") {
            aStarted.open()
            aGo.wait()
        }
        a.queuePriority = .high  // taken first from the batch
        var ns: [SpindleBlockOperation] = []
        for i in 1...40 {
            let name = "N\(i)"
            ns.append(qtNamed(name) { log.append(name) })
        }
        try queue.addOperations([a] + ns)
        #expect(aStarted.wait(), "A started")
        let reserved = ns.prefix(7).allSatisfy { Self.isReserved($0, in: queue) }
        #expect(reserved, "setup: A's worker reserved N1…N7")
        ns[4].queuePriority = .veryHigh
        bGo.open()  // worker 2's slot frees
        #expect((try? ns[4].waitUntilFinished(timeout: .seconds(qtDeadline))) == true, "N5 ran")
        let order = log.all
        #expect(order.first == "N5", "first started after the slot freed: \(order.prefix(3))")
        aGo.open()
        qtDrain(queue)
    }

    // MARK: - C2: waiters of an operation a worker ran are held until its whole reserved batch has run

    /// Width 1, a backlog of 31 behind A: the worker takes A and reserves the next 7 (R1 first). A thread waits
    /// for A, then opens a gate R1 waits for. Foundation (and `waitUntilFinished`'s own contract: it returns once
    /// the operation finished and its completion block returned) lets the waiter go when A finishes; here A's
    /// waiters are released only after the worker has run its reserved batch, R1 included, so R1 waits for a
    /// thread that waits for R1's worker: a deadlock, broken here only by R1's timeout.
    @Test(qtOwnThreadsOnly) func waiterOfTheTakenOperationIsNotHeldBehindTheReservedBatch() throws {
        let queue = try SpindleOperationQueue(name: "review-C2", maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let s = QTGate(), r1Done = QTGate()
        let r1SawGate = QTFlag()
        let a = qtNamed("A")
        // Nobody waits for R1 (a waiter would keep it out of a reservation): it reports through a gate.
        let r1 = qtNamed("R1") {
            if s.wait(seconds: 3) { r1SawGate.set() }
            r1Done.open()
        }
        let fillers = (1...30).map { qtNamed("F\($0)") }
        try queue.addOperations([a, r1] + fillers)
        let waiter = try BTThread("c2-waiter") {
            _ = try? a.waitUntilFinished(timeout: .seconds(qtDeadline))
            s.open()
        }
        #expect(btWaitUntil { a.hasWaiters.load(ordering: .acquiring) }, "the waiter registered")
        queue.isSuspended = false
        #expect(r1Done.wait(), "R1 finished")
        #expect(queue.core.lock.withLock { queue.core.reservedTotal } > 0, "setup: the worker reserved a batch")
        #expect(r1SawGate.isSet, "R1 saw the gate its waiter opens once A finished (R1 timed out after 3 s)")
        #expect(waiter.join())
        qtDrain(queue)
    }

    /// The same for a reserved operation's waiter: the worker finishes R1 (reserved), then runs R2 (reserved),
    /// which waits for a thread that waits for R1; R1's waiters are released only after the batch.
    @Test(qtOwnThreadsOnly) func waiterOfAReservedOperationIsNotHeldBehindTheRestOfTheBatch() throws {
        let queue = try SpindleOperationQueue(name: "review-C2b", maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let s = QTGate(), aStarted = QTGate(), aGo = QTGate()
        let r2SawGate = QTFlag()
        let a = qtNamed("A") {
            aStarted.open()
            aGo.wait()
        }
        let r1 = qtNamed("R1")
        let r2 = qtNamed("R2") { if s.wait(seconds: 3) { r2SawGate.set() } }
        let fillers = (1...30).map { qtNamed("F\($0)") }
        try queue.addOperations([a, r1, r2] + fillers)
        queue.isSuspended = false
        #expect(aStarted.wait(), "A started")
        #expect(Self.isReserved(r1, in: queue) && Self.isReserved(r2, in: queue), "setup: R1 and R2 are reserved")
        let waiter = try BTThread("c2b-waiter") {
            _ = try? r1.waitUntilFinished(timeout: .seconds(qtDeadline))
            s.open()
        }
        #expect(btWaitUntil { r1.hasWaiters.load(ordering: .acquiring) }, "the waiter registered")
        aGo.open()
        #expect((try? r2.waitUntilFinished(timeout: .seconds(qtDeadline))) == true, "R2 finished")
        #expect(r2SawGate.isSet, "R2 saw the gate R1's waiter opens once R1 finished (R2 timed out after 3 s)")
        #expect(waiter.join())
        qtDrain(queue)
    }

    /// A waiter that comes late: it starts waiting for A only once A has finished and the worker runs R1, reserved
    /// behind A (R1 holds the worker until the waiter has registered). R2,
    /// later in the batch, waits for a gate that waiter opens once its wait returns. The worker must not claim R2
    /// before A's waiters are released: it sees the late registration (`SpindleOperation.lateWaiters`) and stops.
    /// (A late waiter on the operation the worker is running at that moment still waits for it: that one is not
    /// covered.)
    @Test(qtOwnThreadsOnly) func aLateWaiterIsNotHeldBehindTheRestOfTheBatch() throws {
        let queue = try SpindleOperationQueue(name: "review-C2c", maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let aStarted = QTGate(), aGo = QTGate(), r1Started = QTGate(), s = QTGate()
        let r2SawGate = QTFlag()
        let a = qtNamed("A") {
            aStarted.open()
            aGo.wait()
        }
        let r1 = qtNamed("R1") {
            r1Started.open()  // A has finished; its waiters wait for the batch's bookkeeping
            _ = btWaitUntil { a.hasWaiters.load(ordering: .acquiring) }
        }
        let r2 = qtNamed("R2") { if s.wait(seconds: 3) { r2SawGate.set() } }
        let fillers = (1...30).map { qtNamed("F\($0)") }
        try queue.addOperations([a, r1, r2] + fillers)
        queue.isSuspended = false
        #expect(aStarted.wait(), "A started")
        #expect(Self.isReserved(r1, in: queue) && Self.isReserved(r2, in: queue), "setup: R1 and R2 are reserved")
        let waiter = try BTThread("c2c-waiter") {
            _ = r1Started.wait()
            _ = try? a.waitUntilFinished(timeout: .seconds(qtDeadline))
            s.open()
        }
        aGo.open()
        #expect((try? r2.waitUntilFinished(timeout: .seconds(qtDeadline))) == true, "R2 finished")
        #expect(r2SawGate.isSet, "R2 saw the gate A's late waiter opens once A settled (R2 timed out after 3 s)")
        #expect(waiter.join())
        qtDrain(queue)
    }

    // MARK: - C3: a batch wait held behind a barrier that waits for the caller hangs instead of being refused

    /// Width 2 (so the slot check passes). A runs; a barrier is added after it; A then adds X with
    /// `waitUntilFinished: true`. X is held behind the barrier, the barrier waits for A, A waits for X: the wait
    /// can never end, which `addOperations` documents as `waitOnOwnQueue` ("the wait could never end"), and SEMANTICS
    /// 3 asks waits on yourself to be detected. It hangs. A process of its own: the hang cannot be undone.
    /// Exit 0: refused with `waitOnOwnQueue`; 1: still waiting after 5 s (the bug); 3: another outcome.
    @Test func batchWaitHeldBehindABarrierThatWaitsForTheCallerDoesNotHang() async {
        await #expect(processExitsWith: .success) {
            guard let queue = try? SpindleOperationQueue(name: "review-C3", maxConcurrentOperationCount: 2) else {
                exit(2)
            }
            let aStarted = QTGate(), aGo = QTGate(), done = QTGate()
            let outcome = SpindleLockedValue<String>("none")
            let a = qtNamed("A") {
                aStarted.open()
                aGo.wait()
                do {
                    try queue.addOperations([qtNamed("X")], waitUntilFinished: true)
                    outcome.withLockedValue { $0 = "returned" }
                } catch {
                    outcome.withLockedValue { $0 = "\(error)" }
                }
                done.open()
            }
            guard (try? queue.addOperation(a)) != nil, aStarted.wait() else { exit(2) }
            queue.addBarrierBlock {}
            aGo.open()
            guard done.wait(seconds: 5) else { exit(1) }
            exit(outcome.value == "\(SpindleError.waitOnOwnQueue(name: "review-C3"))" ? 0 : 3)
        }
    }

    // MARK: - C4: an empty batch wait from a width-1 queue's own operation is refused as a deadlock

    /// `addOperations([], waitUntilFinished: true)` waits for nothing (Foundation returns at once), so it cannot
    /// deadlock; from an operation of a width-1 queue it throws `waitOnOwnQueue`, a misuse error for no misuse.
    @Test func emptyBatchWaitFromAWidthOneQueuesOwnOperationReturns() throws {
        let queue = try SpindleOperationQueue(name: "review-C4", maxConcurrentOperationCount: 1)
        let outcome = SpindleLockedValue<String>("not run")
        try queue.addOperation(qtNamed("A") {
            do {
                try queue.addOperations([], waitUntilFinished: true)
                outcome.withLockedValue { $0 = "returned" }
            } catch {
                outcome.withLockedValue { $0 = "threw \(error)" }
            }
        })
        qtDrain(queue)
        #expect(outcome.value == "returned")
    }

    // MARK: - C5: a dependency added to an enqueued barrier is listed but not waited for

    /// `addBarrierBlock` returns the barrier's operation "to wait on, observe, or make other operations depend
    /// on"; `addDependency` on it succeeded and listed the dependency, but `QueueCore.holdBackReady` refuses barriers
    /// (`!op.isBarrier`), so the dependency was not counted: the barrier started while its dependency was still
    /// running. (SEMANTICS 8: an operation must never start before its dependency.) A barrier's place in its queue
    /// decides when it runs: it now refuses dependencies (`barrierTakesNoDependencies`), listing nothing.
    @Test func aBarrierRefusesADependencyAndRunsInItsPlace() throws {
        let queue = try SpindleOperationQueue(name: "review-C5", maxConcurrentOperationCount: 1)
        let other = try SpindleOperationQueue(name: "review-C5-other", maxConcurrentOperationCount: 1)
        let xStarted = QTGate(), xGo = QTGate()
        let x = qtNamed("X") {
            xStarted.open()
            xGo.wait()
        }
        try other.addOperation(x)
        #expect(xStarted.wait(), "X started")
        queue.isSuspended = true
        let ran = QTGate()
        let barrier = queue.addBarrierBlock { ran.open() }
        expectSpindleError(.barrierTakesNoDependencies(name: "barrier")) { try barrier.addDependency(x) }
        #expect(barrier.dependencies.isEmpty, "nothing listed")
        queue.isSuspended = false
        #expect(ran.wait(), "the barrier ran in its place, X unfinished and not its dependency")
        #expect(!x.isFinished)
        xGo.open()
        qtDrain(queue)
        qtDrain(other)
    }

    // MARK: - C6: a batch wait on a run-loop-served queue from the loop's own thread hangs

    /// A queue served by a run loop (as the main queue is by the main thread) is run by that loop's thread alone.
    /// From that thread, outside any operation, `waitUntilAllOperationsAreFinished` is refused (`waitOnOwnQueue`:
    /// "the loop's thread is its one worker, in or out of an operation"), but `addOperations(_:waitUntilFinished:
    /// true)` is not checked (`slotsHeldByCallingThread` is empty there): it waits for operations only this blocked
    /// thread can run, for ever. (`SpindleOperationQueue.main.addOperations([op], waitUntilFinished: true)` on the
    /// main thread.) A process of its own: the hang cannot be undone. Exit 0: refused with `waitOnOwnQueue`, as the
    /// drain wait is; 1: still waiting after 5 s (the bug); 3: another outcome; 4: the control (the drain wait) was
    /// not refused.
    @Test func batchWaitFromTheServingRunLoopsThreadDoesNotHang() async {
        await #expect(processExitsWith: .success) {
            let done = QTGate()
            let outcome = SpindleLockedValue<String>("none")
            let control = SpindleLockedValue<String>("none")
            let expected = "\(SpindleError.waitOnOwnQueue(name: "review-C6"))"
            guard (try? SpindleThread.detach(name: "c6-loop", {
                let queue = SpindleOperationQueue(name: "review-C6", servedBy: SpindleRunLoop.current)
                do {
                    _ = try queue.waitUntilAllOperationsAreFinished(timeout: .zero)
                    control.withLockedValue { $0 = "returned" }
                } catch {
                    control.withLockedValue { $0 = "\(error)" }
                }
                do {
                    try queue.addOperations([qtNamed("X")], waitUntilFinished: true)
                    outcome.withLockedValue { $0 = "returned" }
                } catch {
                    outcome.withLockedValue { $0 = "\(error)" }
                }
                done.open()
            })) != nil else { exit(2) }
            guard done.wait(seconds: 5) else { exit(control.value == expected ? 1 : 4) }
            exit(outcome.value == expected ? 0 : 3)
        }
    }

    // MARK: - C7: operationCount counts a finished operation that `operations` no longer lists

    /// `operationCount` was documented as "How many operations are in the queue and not finished", `operations` as
    /// "added and not yet finished". From a finished operation's completion block (on the queue's worker, before its
    /// queue bookkeeping), `operations` is empty but `operationCount` still counts it: it is
    /// `members.countedByCapacity`, which includes finished members not yet unlinked. `operationCount` is O(1) and
    /// now documented as counting until that bookkeeping; this pins both, and that they agree once it is done.
    @Test func operationCountCountsAFinishedOperationUntilItsBookkeeping() throws {
        let queue = try SpindleOperationQueue(name: "review-C7", maxConcurrentOperationCount: 1)
        let seen = SpindleLockedValue<(count: Int, listed: Int, finished: Bool)?>(nil)
        let a = qtNamed("A")
        a.completionBlock = {
            seen.withLockedValue { $0 = (queue.operationCount, queue.operations.count, a.isFinished) }
        }
        try queue.addOperation(a)
        qtDrain(queue)
        let s = seen.value
        #expect(s?.finished == true)
        #expect(s?.listed == 0, "operations lists only unfinished operations")
        #expect(s?.count == 1, "operationCount counts it until the queue's bookkeeping")
        #expect(queue.operationCount == 0 && queue.operations.isEmpty)
    }

    // MARK: - C8: a suspended queue released with work pending never runs it and is never freed

    /// Makes a suspended queue holding `op` and lets go of it (its only reference).
    @inline(never)
    static func abandonSuspendedQueue(holding op: SpindleOperation) throws -> QTWeak<SpindleOperationQueue> {
        let queue = try SpindleOperationQueue(name: "review-C8", maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        try queue.addOperation(op)
        return QTWeak(queue)
    }

    /// SEMANTICS 9: "A queue whose owner lets go of it while operations are pending still runs them all, then is
    /// freed and its threads exit." A suspended queue released with an operation pending keeps itself alive (the
    /// core retains the handle while anything is outstanding) but stays suspended, and nobody holds a reference that
    /// could resume it: the operation never runs (nor finishes cancelled) and the queue is never freed. (`shutdown`
    /// lifts a suspension; the release does not.) Open, documented in the README (Status): the queue stays
    /// reachable through `owningQueue` of its pending operations, and resuming it runs them and frees it. A known
    /// issue here, so this fails once the behaviour changes and the README must follow.
    @Test func suspendedQueueReleasedWithWorkPendingRunsItAndIsFreed() throws {
        let ran = QTGate()
        let op = qtNamed("pending") { ran.open() }
        let weak = try Self.abandonSuspendedQueue(holding: op)
        withKnownIssue("a suspended queue let go of keeps its work and itself until resumed") {
            let finished = (try? op.waitUntilFinished(timeout: .seconds(1))) == true
            #expect(finished, "the pending operation finished (ran: \(ran.tryWait()))")
        }
        // What the README promises instead: resumed through an operation it holds, it runs them and is freed.
        op.owningQueue?.isSuspended = false
        #expect(ran.wait(), "resumed through owningQueue, the pending operation ran")
        #expect(qtWaitUntil(seconds: qtDeadline) { weak.isGone }, "the queue was freed once its work was done")
    }

    // MARK: - C6b: a batch wait from user code a worker runs outside an operation (a deinit) hangs

    /// Width 1. An operation owns an object whose deinit adds a batch to the queue with `waitUntilFinished: true`;
    /// the queue's worker drops its last reference to the finished operation, so the deinit runs on that worker,
    /// outside any operation. The drain wait is refused there (`waitOnOwnQueue`: "from code one of its workers runs
    /// outside them (a finished operation's deinit)"), but the batch wait is not checked
    /// (`slotsHeldByCallingThread` looks only at the operation this thread runs): it waits for X, which only this
    /// blocked worker could run. A process of its own. Exit 0: refused with `waitOnOwnQueue`; 1: still waiting
    /// after 5 s (the bug); 3: another outcome; 4: the control (the drain wait from the same deinit) not refused.
    @Test(qtOwnThreadsOnly) func batchWaitFromADeinitOnTheQueuesWorkerDoesNotHang() async {
        await #expect(processExitsWith: .success) {
            guard let queue = try? SpindleOperationQueue(name: "review-C6b", maxConcurrentOperationCount: 1) else {
                exit(2)
            }
            queue.isSuspended = true
            guard (try? Self.addOwnerOfBatchWaitingDeinit(queue)) != nil else { exit(2) }
            queue.isSuspended = false
            let expected = "\(SpindleError.waitOnOwnQueue(name: "review-C6b"))"
            guard C6bState.done.wait(seconds: 5) else { exit(C6bState.control.value == expected ? 1 : 4) }
            exit(C6bState.outcome.value == expected ? 0 : 3)
        }
    }

    @inline(never)
    static func addOwnerOfBatchWaitingDeinit(_ queue: SpindleOperationQueue) throws {
        try queue.addOperation(C6bHolder(C6bCanary(queue)))
    }
}

/// What C6b's deinit saw.
enum C6bState {
    static let done = QTGate()
    static let control = SpindleLockedValue<String>("none")
    static let outcome = SpindleLockedValue<String>("none")
}

/// Dies with its operation, on the worker that drops the queue's last reference to it.
final class C6bCanary: @unchecked Sendable {
    let queue: SpindleOperationQueue
    init(_ queue: SpindleOperationQueue) { self.queue = queue }
    deinit {
        do {
            _ = try self.queue.waitUntilAllOperationsAreFinished(timeout: .zero)
            C6bState.control.withLockedValue { $0 = "returned" }
        } catch {
            C6bState.control.withLockedValue { $0 = "\(error)" }
        }
        do {
            try self.queue.addOperations([qtNamed("X")], waitUntilFinished: true)
            C6bState.outcome.withLockedValue { $0 = "returned" }
        } catch {
            C6bState.outcome.withLockedValue { $0 = "\(error)" }
        }
        C6bState.done.open()
    }
}

/// An operation that owns a canary (not its block: a block is released inside `main`).
final class C6bHolder: SpindleOperation, @unchecked Sendable {
    let canary: C6bCanary
    init(_ canary: C6bCanary) {
        self.canary = canary
        super.init()
    }
    override func main() {}
}
