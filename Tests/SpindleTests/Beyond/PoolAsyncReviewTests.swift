import Glibc
import Synchronization
import Testing

@_spi(Faults) @testable import Spindle

// Review of the shared pool, pool-served queues, block helpers and the async layer. Each test fails (or times out
// on a bounded wait) on the code it was written against; names start with `par`/`PAR`.

/// An operation that calls `onDeinit` when its last reference goes (the queue's, after it ran).
final class PARDeinitProbe: SpindleOperation, @unchecked Sendable {
    let onDeinit: @Sendable () -> Void
    init(_ onDeinit: @escaping @Sendable () -> Void) {
        self.onDeinit = onDeinit
        super.init()
        self.name = "par-probe"
    }
    override func main() throws {}
    deinit { self.onDeinit() }
}

/// What a termination wait made from a deinit saw ("returned true/false" or "threw <error>").
final class PAROutcome: @unchecked Sendable {
    private let lock = QTLock()
    private var value: String? = nil
    func set(_ v: String) { self.lock.withLock { self.value = v } }
    var result: String? { self.lock.withLock { self.value } }
}

func parThrew(_ error: SpindleError) -> String { "threw \(error)" }

/// Adds a probe whose deinit waits (bounded) for `queue` to terminate, keeping no reference to it here.
@inline(never)
func parAddTerminationWaitingProbe(_ queue: SpindleOperationQueue, outcome: PAROutcome, done: QTGate) throws {
    let probe = PARDeinitProbe {
        do throws(SpindleError) {
            outcome.set("returned \(try queue.awaitTermination(timeout: .seconds(3)))")
        } catch {
            outcome.set(parThrew(error))
        }
        done.open()
    }
    try queue.addOperation(probe)
}

/// Adds a probe whose deinit waits (bounded) for `queue` to drain, keeping no reference to it here.
@inline(never)
func parAddDrainWaitingProbe(_ queue: SpindleOperationQueue, outcome: PAROutcome, done: QTGate) throws {
    let probe = PARDeinitProbe {
        do throws(SpindleError) {
            outcome.set("returned \(try queue.waitUntilAllOperationsAreFinished(timeout: .seconds(3)))")
        } catch {
            outcome.set(parThrew(error))
        }
        done.open()
    }
    try queue.addOperation(probe)
}

@Suite("Review of the pool and async layers", .timeLimit(.minutes(2))) struct PoolAsyncReviewTests {
    /// Control: on a queue with its own threads, the deinit of an operation the worker releases is refused
    /// (`waitOnOwnQueue`): the worker it would wait for is the calling thread (see
    /// `refuseTerminationWaitFromOwnOperation`, "user code a worker runs outside an operation: a deinit").
    @Test(.disabled(if: qtQueuesOnPool, "tests a queue's own threads"))
    func parControlOwnThreadsRefuseTerminationWaitFromDeinit() throws {
        let queue = SpindleOperationQueue(name: "par-own")
        let outcome = PAROutcome()
        let done = QTGate()
        queue.isSuspended = true
        try parAddTerminationWaitingProbe(queue, outcome: outcome, done: done)
        queue.shutdown(.drain)  // resumes it
        #expect(done.wait())
        #expect(outcome.result == parThrew(.waitOnOwnQueue(name: "par-own")))
        #expect(try queue.awaitTermination(timeout: .seconds(qtDeadline)))
    }

    /// The same on a pool-served queue: the serve restores `workerOf` before dropping the operations it ran
    /// (`QueueCore+Pool.swift`, `context.workerOf = outerWorker` before the last `perform(&after)`), while it still
    /// counts in `serving` until `serveEnded`. So the deinit's termination wait is not refused and waits for the
    /// serve it is part of: the blocking form hangs for ever (here bounded by 3 s, it returns false).
    @Test func parPoolServedQueueRefusesTerminationWaitFromDeinitOfOperationItReleases() throws {
        let pool = try SpindleThreadPool(name: "par-deinit", threadCount: 1)
        let queue = SpindleOperationQueue(name: "par-pool", pool: pool)
        let outcome = PAROutcome()
        let done = QTGate()
        queue.isSuspended = true
        try parAddTerminationWaitingProbe(queue, outcome: outcome, done: done)
        queue.shutdown(.drain)  // resumes it
        #expect(done.wait())
        #expect(outcome.result == parThrew(.waitOnOwnQueue(name: "par-pool")))
        #expect(try queue.awaitTermination(timeout: .seconds(qtDeadline)))
    }

    /// The drain wait, same root cause: "Throws `waitOnOwnQueue` when called ... from code one of its workers runs
    /// outside them (a finished operation's deinit)". A queue with its own threads throws there; on a pool-served
    /// queue (whose serving thread is its worker, `QueueCore+Pool`) the deinit run by the serve's last release is
    /// no longer seen as the worker's, and the wait is not refused (here it returns true: nothing else is left).
    @Test func parPoolServedQueueRefusesDrainWaitFromDeinitOfOperationItReleases() throws {
        let pool = try SpindleThreadPool(name: "par-drain", threadCount: 1)
        let queue = SpindleOperationQueue(name: "par-pool-drain", pool: pool)
        let outcome = PAROutcome()
        let done = QTGate()
        queue.isSuspended = true
        try parAddDrainWaitingProbe(queue, outcome: outcome, done: done)
        queue.isSuspended = false
        #expect(done.wait())
        #expect(outcome.result == parThrew(.waitOnOwnQueue(name: "par-pool-drain")))
        qtDrain(queue)
    }

    /// Control: the same wait made from the owner's own (only) block on the pool's only thread is served by a
    /// stand-in (the semaphore wait tells the pool).
    @Test func parControlTheOwnersOwnBlockWaitingForWorkOnTheSamePoolIsServed() throws {
        let pool = try SpindleThreadPool(name: "par-one-block", threadCount: 1)
        let outer = SpindleOperationQueue(name: "par-outer1", pool: pool)
        let inner = SpindleOperationQueue(name: "par-inner1", pool: pool)
        let waited = QTLog<Bool>()
        let block = SpindleBlockOperation {
            let work = SpindleBlockOperation {}
            try? inner.addOperation(work)
            waited.append((try? work.waitUntilFinished(timeout: .seconds(3))) ?? false)
        }
        try outer.addOperation(block)
        #expect(try block.waitUntilFinished(timeout: .seconds(qtDeadline)))
        #expect(waited.all == [true])
        qtDrain(inner)
        qtDrain(outer)
    }

    /// A block operation on a pool of one thread whose extra block (run by a `BlockHelperPool` thread) waits for
    /// an operation of another queue on the same pool. The pool's only thread is the block operation's owner,
    /// waiting in `BlockHelperPool.waitForHelpers`, a Spindle wait the pool is not told of (no `blocking`), so no
    /// stand-in serves the other queue: the helper's wait can never end. The same wait made from the owner's own
    /// block is served by a stand-in.
    @Test func parBlockHelperWaitingForWorkOnTheSamePoolIsServed() throws {
        let pool = try SpindleThreadPool(name: "par-blocks", threadCount: 1)
        let outer = SpindleOperationQueue(name: "par-outer", pool: pool)
        let inner = SpindleOperationQueue(name: "par-inner", pool: pool)
        let helperStarted = QTGate()
        let waited = QTLog<Bool>()
        let blocks = SpindleBlockOperation {
            // Block 0, on the pool's thread: return only once the helper took block 1, so the owner ends up in
            // `waitForHelpers` while the helper waits.
            _ = helperStarted.wait()
        }
        try blocks.addExecutionBlock {
            helperStarted.open()
            let work = SpindleBlockOperation {}
            try? inner.addOperation(work)
            waited.append((try? work.waitUntilFinished(timeout: .seconds(3))) ?? false)
        }
        try outer.addOperation(blocks)
        #expect(try blocks.waitUntilFinished(timeout: .seconds(qtDeadline)))
        #expect(waited.all == [true])
        qtDrain(inner)
        qtDrain(outer)
    }
}

// MARK: - A moved run-loop executor: a job enqueued while the exiting thread moves the waiting ones

/// An actor that records the order its calls ran in.
actor PAROrderedDevice {
    let executor: SpindleRunLoopExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { self.executor.asUnownedSerialExecutor() }
    private(set) var order: [String] = []
    init(executor: SpindleRunLoopExecutor) { self.executor = executor }
    func record(_ tag: String) { self.order.append(tag) }
}

extension PoolAsyncReviewTests {
    /// "the jobs still waiting on the loop, and every job enqueued later, run on [the stand-in], still one at a
    /// time and in the order enqueued". `ownerDidExit` releases the dropped performs one by one with no lock held;
    /// the first one's `PendingJob.deinit` → `move` publishes `standIn` (and reports the move) before it performs
    /// that job on the stand-in, and before the next dropped job is released. An `enqueue` from another thread
    /// meanwhile reads `standIn` and performs its job on the stand-in at once: it runs before the jobs enqueued
    /// earlier. The diagnostics handler (user code, on the exiting thread, between publishing and performing)
    /// holds the exiting thread at that point, standing in for a preemption there.
    /// A process of its own: the diagnostics handler is process-wide. It exits 0 having written the order it saw to
    /// standard error, which the test checks, so that a failure shows the order (the bug's was `["third", "first",
    /// "second"]`); 2–4: the setup failed.
    @Test func parAMovedExecutorRunsAJobEnqueuedDuringTheMoveAfterTheWaitingOnes() async {
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            let ready = QTGate(), exitGate = QTGate(), moved = QTGate(), release = QTGate()
            let handOff = SpindleLockedValue<SpindleRunLoop?>(nil)
            guard let thread = try? SpindleThread.spawnJoinable(name: "par-leaving", {
                handOff.withLockedValue { $0 = SpindleRunLoop.current }
                ready.open()
                _ = exitGate.wait(seconds: 60)  // alive, never runs its loop
            }) else { exit(2) }
            guard ready.wait(), let loop = handOff.value else { exit(3) }
            let loopDescription = "\(loop)"
            SpindleDiagnostics.setHandler { event in
                if case .runLoopExecutorMoved(let runLoop, _) = event, runLoop == loopDescription {
                    moved.open()
                    _ = release.wait(seconds: 30)  // the exiting thread, between publishing the stand-in and performing
                }
            }
            let device = PAROrderedDevice(executor: SpindleRunLoopExecutor(runLoop: loop))
            let first = Task { await device.record("first") }
            guard await atEventually(seconds: 60, { loop.state.withLock { $0.performs.count } == 1 }) else { exit(4) }
            let second = Task { await device.record("second") }
            guard await atEventually(seconds: 60, { loop.state.withLock { $0.performs.count } == 2 }) else { exit(4) }
            exitGate.open()  // the thread exits: its loop drops both jobs, which move
            guard await atEventually(seconds: 60, { moved.tryWait() }) else { exit(4) }
            let thirdDone = QTFlag()
            let third = Task {
                await device.record("third")  // enqueued after both
                thirdDone.set()
            }
            let thirdEarly = await atEventually(seconds: 5) { thirdDone.isSet }  // the bug: it ran already
            release.open()
            _ = await first.value
            _ = await second.value
            _ = await third.value
            try? thread.join()
            let order = await device.order
            let line = "order \(order); third done before the release: \(thirdEarly)\n"
            _ = line.withCString { write(STDERR_FILENO, $0, strlen($0)) }
            exit(0)
        }
        if let result {
            let report = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(report.contains(#"order ["first", "second", "third"];"#), "the child wrote: \(report)")
        }
    }
}

// MARK: - A pool whose thread starts gave up: a termination wait does not try again

extension PoolAsyncReviewTests {
    /// Control (a process of its own, so that the process timer's thread has not started): a queue with its own
    /// threads whose worker and timer starts all fail gives up after the in-place retries (about 1 s); once
    /// threads can be made again, its termination wait's wake decision starts a worker ("Each wait begins with a
    /// wake decision, so a shut-down queue whose thread starts failed tries again").
    @Test(.disabled(if: qtQueuesOnPool, "tests a queue's own threads"))
    func parControlOwnThreadsQueueWhoseStartsGaveUpIsServedByItsTerminationWait() async {
        await #expect(processExitsWith: .success) {
            let queue: SpindleOperationQueue
            do { queue = try SpindleOperationQueue(name: "par.own.gaveup", maxConcurrentOperationCount: 1) } catch {
                exit(2)
            }
            let ran = QTFlag()
            SpindleFaults.inject(.threadCreate, .always, onlyOnThisThread: true)
            try? queue.addOperation(SpindleBlockOperation { ran.set() })  // retries in place, then gives up
            SpindleFaults.reset()
            if ran.isSet { exit(3) }  // not the scenario: it was not stranded
            queue.shutdown()
            let terminated = (try? queue.awaitTermination(timeout: .seconds(5))) ?? false
            exit(terminated && ran.isSet ? 0 : 1)
        }
    }

    /// The same on a pool-served queue: `PoolCore.threadFailedToStart` gives up (`retryPending = false`, "the next
    /// request or wait tries again"), leaving the request in the pool's line with no thread alive. The queue's
    /// termination wait begins with a wake decision, but a pool-served queue's decision sends no request while
    /// `servesPending` already covers its ready operations (`IdleWorkers.wakeOrSpawn`, case `.pool`), and nothing
    /// else pokes the pool: the operation never runs and the queue never terminates, though threads can be made
    /// again.
    @Test func parAPoolServedQueueWhoseStartsGaveUpIsServedByItsTerminationWait() async {
        await #expect(processExitsWith: .success) {
            let pool: SpindleThreadPool, queue: SpindleOperationQueue
            do {
                pool = try SpindleThreadPool(name: "par.pool.gaveup", threadCount: 1)
                queue = try SpindleOperationQueue(name: "par.pool.gaveup.q", maxConcurrentOperationCount: 1, pool: pool)
            } catch {
                exit(2)
            }
            let ran = QTFlag()
            SpindleFaults.inject(.threadCreate, .always, onlyOnThisThread: true)
            try? queue.addOperation(SpindleBlockOperation { ran.set() })  // retries in place, then gives up
            SpindleFaults.reset()
            if ran.isSet { exit(3) }  // not the scenario: it was not stranded
            queue.shutdown()
            let terminated = (try? queue.awaitTermination(timeout: .seconds(5))) ?? false
            if terminated && ran.isSet { exit(0) }
            // Stranded. Any other request to the pool rescues it (the mechanism): exit 4 then, 1 if not even that.
            guard let other = try? SpindleOperationQueue(name: "par.pool.gaveup.other", pool: pool) else { exit(2) }
            try? other.addOperation(SpindleBlockOperation {})
            let rescued = (try? queue.awaitTermination(timeout: .seconds(5))) ?? false
            exit(rescued && ran.isSet ? 4 : 1)
        }
    }
}
