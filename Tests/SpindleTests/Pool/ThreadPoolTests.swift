import Glibc
import Testing

@testable import Spindle

/// Queues sharing a `SpindleThreadPool`: each keeps its own width, priorities, suspension and barriers; together
/// they use at most the pool's threads; they take turns; a pool thread blocked in a Spindle wait is stood in for;
/// a released pool's threads are gone. Meeting points are POSIX semaphores (`QTGate`) with generous deadlines.
@Suite struct ThreadPoolTests {
    @Test func aPoolNeedsAtLeastOneThread() {
        qtExpectError(.invalidThreadCount(0)) { _ = try SpindleThreadPool(threadCount: 0) }
        qtExpectError(.invalidThreadCount(-3)) { _ = try SpindleThreadPool(name: "bad", threadCount: -3) }
        qtExpectError(.invalidThreadCount(.max)) { _ = try SpindleThreadPool(threadCount: .max) }
        qtExpectError(.invalidThreadCount(SpindleThreadPool.maximumThreadCount + 1)) {
            _ = try SpindleThreadPool(threadCount: SpindleThreadPool.maximumThreadCount + 1)
        }
        #expect(SpindleError.invalidThreadCount(0).description.contains("at least 1 thread"))
    }

    @Test func twentyQueuesRunOnThePoolsThreadsOnly() throws {
        let pool = try SpindleThreadPool(name: "twenty", threadCount: 2)
        let queues = (0..<20).map { SpindleOperationQueue(name: "q\($0)", pool: pool) }
        let tids = QTLog<Int32>()
        let names = QTLog<String>()
        for queue in queues {
            #expect(queue.pool === pool)
            for _ in 0..<10 {
                queue.addOperation {
                    tids.append(qtTid())
                    names.append(SpindleThread.current.name)
                }
            }
        }
        for queue in queues { qtDrain(queue) }
        #expect(tids.count == 200)
        #expect(Set(tids.all).count <= 2)  // no queue started a thread of its own
        #expect(names.all.allSatisfy { $0.hasPrefix("spindle.p") })
        #expect(pool.liveThreadCount <= 2)
        for queue in queues { #expect(qtWorkerThreadCount(queue) == 0) }
    }

    @Test func eachQueueKeepsItsOwnWidth() throws {
        let pool = try SpindleThreadPool(threadCount: 4)
        let narrow = try SpindleOperationQueue(name: "narrow", maxConcurrentOperationCount: 1, pool: pool)
        let wide = try SpindleOperationQueue(name: "wide", maxConcurrentOperationCount: 3, pool: pool)
        let narrowHigh = QTHighWater()
        let wideHigh = QTHighWater()
        // Three wide operations must be inside at once (a rendezvous), while the narrow queue never runs two.
        let meet = QTRendezvous(parties: 3)
        let met = QTCounter()
        for _ in 0..<3 {
            wide.addOperation {
                wideHigh.enter()
                if meet.arrive() { met.increment() }
                wideHigh.leave()
            }
        }
        for _ in 0..<40 {
            narrow.addOperation {
                narrowHigh.enter()
                _ = sched_yield()
                narrowHigh.leave()
            }
        }
        qtDrain(wide)
        qtDrain(narrow)
        #expect(met.count == 3)
        #expect(wideHigh.maximum == 3)
        #expect(narrowHigh.maximum == 1)
    }

    @Test func prioritiesSuspensionAndBarriersHoldOnAPool() throws {
        let pool = try SpindleThreadPool(threadCount: 2)
        let queue = try SpindleOperationQueue(name: "ordered", maxConcurrentOperationCount: 1, pool: pool)
        let log = QTLog<String>()
        queue.isSuspended = true
        for (label, priority) in [("low", SpindleOperation.QueuePriority.low), ("high", .high), ("normal", .normal)] {
            let op = qtNamed(label) { log.append(label) }
            op.queuePriority = priority
            try queue.addOperation(op)
        }
        let barrier = queue.addBarrierBlock { log.append("barrier") }
        queue.addOperation { log.append("after") }
        #expect(log.count == 0)  // suspended: nothing ran
        queue.isSuspended = false
        qtDrain(queue)
        #expect(barrier.isFinished)
        #expect(log.all == ["high", "normal", "low", "barrier", "after"])
    }

    @Test func queuesTakeTurnsOnABusyPool() throws {
        let pool = try SpindleThreadPool(name: "turns", threadCount: 1)
        let blocker = SpindleOperationQueue(name: "blocker", pool: pool)
        let busy = try SpindleOperationQueue(name: "busy", maxConcurrentOperationCount: 1, pool: pool)
        let other = SpindleOperationQueue(name: "other", pool: pool)
        let started = QTGate(), release = QTGate()
        blocker.addOperation {
            started.open()
            release.wait()
        }
        #expect(started.wait())  // the pool's one thread is taken: what follows lines up
        let log = QTLog<String>()
        for i in 0..<100 { busy.addOperation { log.append("busy\(i)") } }
        other.addOperation { log.append("other") }
        release.open()
        qtDrain(busy)
        qtDrain(other)
        qtDrain(blocker)
        let position = log.all.firstIndex(of: "other")!
        // The busy queue runs one serve's budget, then goes to the back of the line behind "other".
        #expect(position == QueueCore.poolBudget)
    }

    @Test func anOperationWaitingForWorkOnTheSamePoolIsStoodIn() throws {
        let pool = try SpindleThreadPool(name: "nested", threadCount: 1)
        let outer = SpindleOperationQueue(name: "outer", pool: pool)
        let inner = SpindleOperationQueue(name: "inner", pool: pool)
        let done = QTFlag()
        outer.addOperation {
            // The pool's only thread waits for an operation that needs a pool thread.
            let child = inner.addOperation { done.set() }
            try? child.waitUntilFinished()
            try? inner.waitUntilAllOperationsAreFinished()
        }
        qtDrain(outer)
        qtDrain(inner)
        #expect(done.isSet)
        // The stand-in retires once the wait is over and it finds nothing to do.
        #expect(qtWaitUntil { pool.liveThreadCount <= 1 })
    }

    @Test func aTerminationWaitOnThePoolsOnlyThreadLetsAnotherServe() throws {
        let pool = try SpindleThreadPool(name: "termination", threadCount: 1)
        let outer = SpindleOperationQueue(name: "outer", pool: pool)
        let inner = SpindleOperationQueue(name: "inner", pool: pool)
        let ran = QTFlag(), terminated = QTFlag()
        outer.addOperation {
            inner.addOperation { ran.set() }
            inner.shutdown()
            if (try? inner.awaitTermination(timeout: .seconds(qtDeadline))) == true { terminated.set() }
        }
        qtDrain(outer)
        #expect(ran.isSet && terminated.isSet)
    }

    @Test func aReleasedPoolJoinsItsThreads() throws {
        var threads: [SpindleThread] = []
        do {
            let pool = try SpindleThreadPool(name: "short-lived", threadCount: 2)
            let seen = QTLog<SpindleThread>()
            do {
                let queue = SpindleOperationQueue(name: "on-short-lived", pool: pool)
                for _ in 0..<20 { queue.addOperation { seen.append(SpindleThread.current) } }
                qtDrain(queue)
            }
            for thread in seen.all where !threads.contains(where: { $0 === thread }) { threads.append(thread) }
            #expect(!threads.isEmpty)
        }
        // The queue is gone (its last operation finished and it was released), and with it the pool's last user:
        // the pool's threads have been joined.
        #expect(qtWaitUntil { threads.allSatisfy(\.isFinished) })
    }

    @Test func aCancelledQueueOnAPoolFinishesEverythingAndShutsDown() throws {
        let pool = try SpindleThreadPool(threadCount: 2)
        let queue = try SpindleOperationQueue(name: "cancelled", maxConcurrentOperationCount: 1, pool: pool)
        queue.isSuspended = true
        let ops = (0..<50).map { i in qtNamed("op\(i)") }
        try queue.addOperations(ops)
        queue.shutdown(.cancel)
        #expect(try queue.awaitTermination(timeout: .seconds(qtDeadline)))
        #expect(ops.allSatisfy { $0.isFinished && $0.isCancelled })
        qtExpectError(.queueShutDown(name: "cancelled")) { try queue.addOperation(qtNamed("late")) }
    }

    @Test func groupsRunTheirChildrenOnTheSharedPool() throws {
        let group = try SpindleGroupOperation(operations: [qtNamed("child")])
        #expect(group.inner.pool === SpindleThreadPool.shared)
        let own = try SpindleGroupOperation(operations: [], pool: nil)
        #expect(own.inner.pool == nil)
        let queue = SpindleOperationQueue(name: "groups")
        try queue.addOperations([group, own])
        qtDrain(queue)
        #expect(group.isFinished && own.isFinished)
        #expect(qtWorkerThreadCount(group.inner) == 0)
    }

    /// The README's waiting pattern (an operation parks in its run loop until a port is invalidated by other work)
    /// on a one-thread pool: the run loop's wait is a blocking wait the pool sees, so the work it waits for gets a
    /// thread. Before, `run(untilInvalidated:)` ran into its deadline.
    @Test func aRunLoopWaitOnAPoolThreadLetsAnotherThreadServe() throws {
        let pool = try SpindleThreadPool(name: "rl-wait", threadCount: 1)
        let waiter = SpindleOperationQueue(name: "rl-waiter", pool: pool)
        let helper = SpindleOperationQueue(name: "rl-helper", pool: pool)
        let outcome = QTLog<Bool>()
        let done = QTGate()
        waiter.addOperation {
            let loop = SpindleRunLoop.current
            let port = SpindlePort<Int>(name: "callback") { _ in }
            try? loop.add(port)
            helper.addOperation { port.invalidate() }
            let invalidated = (try? loop.run(untilInvalidated: port, before: .after(.seconds(3 * qtDeadline)))) ?? false
            outcome.append(invalidated)
            done.open()
        }
        #expect(done.wait(seconds: 6 * qtDeadline))
        #expect(outcome.all == [true])
    }

    /// A pool thread renamed by one queue's operation has its name back for the next queue's operation (as block
    /// helpers do). Before, the next operation saw the other queue's name.
    @Test func aPoolThreadsNameDoesNotLeakBetweenQueues() throws {
        let pool = try SpindleThreadPool(name: "names", threadCount: 1)
        let a = SpindleOperationQueue(name: "names-a", pool: pool)
        let b = SpindleOperationQueue(name: "names-b", pool: pool)
        a.addOperation { SpindleThread.current.name = "renamed-by-a" }
        qtDrain(a)
        let seen = QTLog<String>()
        b.addOperation { seen.append(SpindleThread.current.name) }
        qtDrain(b)
        #expect(seen.all.count == 1 && seen.all[0].hasPrefix("spindle.p"), "\(seen.all)")
    }
}
