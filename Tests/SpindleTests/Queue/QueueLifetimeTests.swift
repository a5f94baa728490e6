import Glibc
import Testing

@testable import Spindle

/// A weak reference, checked by polling (the one kind of polling these tests allow).
final class QTWeak<Object: AnyObject> {
    weak var object: Object?
    init(_ object: Object) { self.object = object }
    var isGone: Bool { self.object == nil }
}

/// Signals a gate when freed: proves whoever held the last reference let it go.
final class QTReleaseSentinel: Sendable {
    let gate: QTGate
    init(_ gate: QTGate) { self.gate = gate }
    deinit { self.gate.open() }
}

/// Builds a queue whose only owner, once this returns, is the block of its own operation (a common pattern:
/// `queue.addOperation { queue.… }`), and lets go of it. The operation waits for `release`, opens `done`.
@inline(never)
func qtAbandonQueueOwnedByItsOwnOperation(release: QTGate, done: QTGate, tids: QTLog<Int32>)
    -> QTWeak<SpindleOperationQueue>
{
    let queue = try! SpindleOperationQueue(name: "self-owned", maxConcurrentOperationCount: 1)
    queue.addOperation { [queue] in
        tids.append(qtTid())
        release.wait()
        _ = queue.name
        done.open()
    }
    return QTWeak(queue)
}

/// Lifetimes (contract item 9; catalogue J84): operations, captures of completion blocks and the queue itself are
/// freed; a queue released with pending work runs it all, then is freed and its threads exit. Serialised so that
/// thread accounting is not disturbed by this suite's own tests; other suites may run in parallel, so thread checks
/// follow this queue's own worker tids rather than the process total.
@Suite(.serialized) struct QueueLifetimeTests {
    @inline(never)
    private func runOperations(on queue: SpindleOperationQueue) throws -> [QTWeak<SpindleOperation>] {
        var ops: [SpindleOperation] = []
        for _ in 0..<20 { ops.append(SpindleBlockOperation {}) }
        for i in 1..<ops.count where i % 3 == 0 { try ops[i].addDependency(ops[i - 1]) }
        let invocation = SpindleInvocationOperation { 42 }
        ops.append(invocation)
        ops.append(QTTidConcurrentOperation(log: QTLog<Int32>()))
        try queue.addOperations(ops)
        return ops.map { QTWeak($0) }
    }

    @Test func finishedOperationsAreFreed() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 3)
        let weakOps = try self.runOperations(on: queue)
        qtDrain(queue)
        #expect(qtWaitUntil { weakOps.allSatisfy(\.isGone) }, "\(weakOps.filter { !$0.isGone }.count) ops leaked")
    }

    @Test func completionBlockCapturesAreReleasedOnceItHasRun() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let freed = QTGate()
        let ran = QTCounter()
        let op = SpindleBlockOperation {}
        do {
            let sentinel = QTReleaseSentinel(freed)
            op.completionBlock = { [sentinel] in
                _ = sentinel
                ran.increment()
            }
        }
        try queue.addOperation(op)
        try op.waitUntilFinished()
        #expect(ran.count == 1)
        #expect(op.completionBlock == nil)
        #expect(freed.wait(), "the completion block's captures must be freed while the operation lives on")
        withExtendedLifetime(op) {}
        qtDrain(queue)
    }

    @Test func blockCapturesAreFreedWithTheOperation() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let freed = QTGate()
        do {
            let sentinel = QTReleaseSentinel(freed)
            queue.addOperation { [sentinel] in _ = sentinel }
        }
        qtDrain(queue)
        #expect(freed.wait(), "the queue must not keep a finished block operation (or its block) alive")
    }

    /// Builds a queue with inter-dependent pending work held by `gate`, and lets go of it.
    @inline(never)
    private func abandonQueueWithPendingWork(gate: QTGate, log: QTLog<String>, tids: QTLog<Int32>, lastDone: QTGate)
        throws -> QTWeak<SpindleOperationQueue>
    {
        let queue = try SpindleOperationQueue(name: "abandoned", maxConcurrentOperationCount: 2)
        let a = qtNamed("a") {
            tids.append(qtTid())
            gate.wait()
            log.append("a")
        }
        let b = qtNamed("b") {
            tids.append(qtTid())
            log.append("b")
        }
        let c = qtNamed("c") {
            tids.append(qtTid())
            log.append("c")
        }
        let d = qtNamed("d") {
            tids.append(qtTid())
            log.append("d")
            lastDone.open()
        }
        try b.addDependency(a)
        try c.addDependency(a)
        try d.addDependency(b)
        try d.addDependency(c)
        try queue.addOperations([d, c, b, a])
        return QTWeak(queue)
    }

    @Test(qtOwnThreadsOnly) func aQueueReleasedWithPendingWorkRunsItAllThenIsFreedAndItsThreadsExit() throws {
        // J84.
        let gate = QTGate(), lastDone = QTGate()
        let log = QTLog<String>(), tids = QTLog<Int32>()
        let weakQueue = try self.abandonQueueWithPendingWork(gate: gate, log: log, tids: tids, lastDone: lastDone)
        #expect(!weakQueue.isGone, "pending operations keep their queue alive")
        gate.open()
        #expect(lastDone.wait())
        #expect(qtWaitUntil { weakQueue.isGone }, "the queue must be freed once its work is done")
        let events = log.all
        #expect(events.count == 4)
        #expect(events.first == "a" && events.last == "d")
        let workerTids = Set(tids.all)
        #expect(!workerTids.isEmpty && !workerTids.contains(qtTid()))
        #expect(qtWaitUntil { workerTids.allSatisfy { !qtTaskExists($0) } }, "the queue's threads must exit")
    }

    @inline(never)
    private func useAndReleaseQueue(width: Int, tids: QTLog<Int32>) throws -> QTWeak<SpindleOperationQueue> {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: width)
        let rendezvous = QTRendezvous(parties: width)
        for _ in 0..<width {
            queue.addOperation {
                tids.append(qtTid())
                _ = rendezvous.arrive()
            }
        }
        qtDrain(queue)
        return QTWeak(queue)
    }

    @Test(qtOwnThreadsOnly) func anIdleQueueIsFreedWhenReleasedAndItsWorkerThreadsExit() throws {
        let tids = QTLog<Int32>()
        let weakQueue = try self.useAndReleaseQueue(width: 4, tids: tids)
        #expect(qtWaitUntil { weakQueue.isGone })
        let workerTids = Set(tids.all)
        #expect(workerTids.count == 4)
        #expect(qtWaitUntil { workerTids.allSatisfy { !qtTaskExists($0) } }, "the queue's threads must exit")
    }

    @inline(never)
    private func abandonQueueEndingWithACallback(tids: QTLog<Int32>, runs: QTCounter, errors: QTCounter)
        throws -> QTWeak<SpindleOperationQueue>
    {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 3)
        let first = SpindleBlockOperation { tids.append(qtTid()) }
        // The last operation ends on a callback thread, which then drops the queue's last reference.
        let last = QTCallbackOperation(runs: runs, high: QTHighWater(), finishErrors: errors)
        try last.addDependency(first)
        try queue.addOperations([last, first])
        return QTWeak(queue)
    }

    @Test(qtOwnThreadsOnly) func aQueueWhoseLastOperationEndsOnACallbackThreadIsFreedToo() throws {
        let tids = QTLog<Int32>()
        let runs = QTCounter(), errors = QTCounter()
        let weakQueue = try self.abandonQueueEndingWithACallback(tids: tids, runs: runs, errors: errors)
        #expect(qtWaitUntil { weakQueue.isGone })
        #expect(runs.count == 1 && errors.count == 0)
        let workerTids = Set(tids.all)
        #expect(workerTids.count == 1)
        #expect(qtWaitUntil { workerTids.allSatisfy { !qtTaskExists($0) } })
    }

    @Test(qtOwnThreadsOnly) func manyShortLivedQueuesLeaveNoThreadsBehind() throws {
        let tids = QTLog<Int32>()
        var weakQueues: [QTWeak<SpindleOperationQueue>] = []
        for _ in 0..<20 { weakQueues.append(try self.useAndReleaseQueue(width: 2, tids: tids)) }
        #expect(qtWaitUntil { weakQueues.allSatisfy(\.isGone) })
        let workerTids = Set(tids.all)
        #expect(qtWaitUntil { workerTids.allSatisfy { !qtTaskExists($0) } })
    }

    // A queue whose last reference is held by one of its own operations' blocks must still be freed cleanly. It
    // crashes today: `QueueCore.workerLoop` (QueueCore.swift:240-256) keeps the popped operation bound to `op`
    // until the `continue`, i.e. after it has re-taken `self.lock`, so the operation's final release (its block,
    // and the queue captured there) runs under the queue's lock; `SpindleOperationQueue.deinit` → `shutdown()`
    // locks it again (EDEADLK on the debug error-checking mutex: a trap; a self-deadlock in release builds). Run
    // in a child process so the crash fails this test only.
    @Test(qtOwnThreadsOnly) func aQueueOwnedOnlyByItsOwnOperationIsFreedWithoutCrashing() async {
        await #expect(processExitsWith: .success) {
            qtStartExitTestWatchdog()
            let release = QTGate(), done = QTGate()
            let tids = QTLog<Int32>()
            let weakQueue = qtAbandonQueueOwnedByItsOwnOperation(release: release, done: done, tids: tids)
            release.open()
            guard done.wait() else { exit(5) }
            // A weak reference reads nil as soon as deinit starts: also wait for the worker to have exited.
            guard qtWaitUntil({ weakQueue.isGone }) else { exit(6) }
            guard let worker = tids.all.first, qtWaitUntil({ !qtTaskExists(worker) }) else { exit(7) }
        }
    }
}
