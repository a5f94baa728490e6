import Glibc
import Synchronization
import Testing

@testable import Spindle

/// Probes of queues sharing a small `SpindleThreadPool` (pools made here, not `SPINDLE_QUEUES_ON_POOL`), seventh
/// round (2026-11-26): the semaphore, join and run-loop-thread shutdown tests failed on the code before their fixes.
/// Meeting points are POSIX semaphores (`QTGate`, unseen by the pool) with 10 s deadlines to detect hangs.
@Suite struct PoolProbeTests {
    /// `SpindleSemaphore.wait(until:)` tells the pool it blocks only when `permitHint` reads 0 on entry. A pool thread
    /// that reads a permit there, and loses it to another thread before it takes the semaphore's mutex, parks without
    /// telling the pool: the operation on the same pool that would signal it never gets a thread (the documented
    /// stand-in: "a wait that finds no permit lets the pool start or wake another thread meanwhile").
    ///
    /// The interleaving is forced: the test holds the semaphore's mutex while the pool thread reads the hint (1) and
    /// blocks on that mutex (seen in /proc), then takes the permit itself (as a racing `wait` would) and unlocks.
    @Test func aSemaphoreWaitThatLosesTheLastPermitToAnotherThreadLetsTheSignallerServe() throws {
        let pool = try SpindleThreadPool(name: "probe-sem", threadCount: 1)
        // Two at once whatever the CPU count (the default width is one on one CPU): the signaller must be able to
        // start beside the waiter.
        let queue = try SpindleOperationQueue(name: "probe-sem", maxConcurrentOperationCount: 2, pool: pool)
        let semaphore = try SpindleSemaphore(value: 1)
        let tid = Atomic<Int32>(0)
        let entered = QTGate(), signalled = QTGate()
        let got = QTFlag()
        semaphore.condition.lock()
        queue.addOperation {
            tid.store(qtTid(), ordering: .releasing)
            entered.open()
            // Longer than the test's detector, so a hang shows as the detector firing first.
            if semaphore.wait(timeout: .seconds(2 * qtDeadline)) { got.set() }
        }
        #expect(entered.wait())
        // The waiter saw the permit (hint 1), so it went straight to the mutex, where it now sleeps.
        let asleep = qtWaitUntil { qtThreadState(tid.load(ordering: .acquiring)) == "S" }
        semaphore.takePermitLocked()  // another thread's `wait` takes the last permit first
        semaphore.condition.unlock()
        #expect(asleep)
        // The waiter finds no permit and parks. The signal comes from an operation on the same pool.
        queue.addOperation {
            semaphore.signal()
            signalled.open()
        }
        #expect(signalled.wait(), "the signaller never got a pool thread: the waiter's park was not seen by the pool")
        qtDrain(queue)
        #expect(got.isSet)
    }

    /// The same race through the public API only: a pool operation and the test thread contend for a semaphore's one
    /// permit; the loser is released by an operation queued behind the waiter on the pool's only thread. When the
    /// pool thread loses after reading the permit's hint, its park is unseen and the signaller waits for its timeout.
    @Test func contendingForAPermitOnAOneThreadPoolNeverStrandsTheSignaller() throws {
        let pool = try SpindleThreadPool(name: "probe-sem-race", threadCount: 1)
        let queue = try SpindleOperationQueue(name: "probe-sem-race", maxConcurrentOperationCount: 2, pool: pool)
        var stranded = 0
        var iterations = 0
        let start = qtMonotonicSeconds()
        while iterations < 20_000 && qtMonotonicSeconds() - start < 1 && stranded == 0 {
            iterations += 1
            let semaphore = try SpindleSemaphore(value: 1)
            let go = Atomic<Bool>(false)
            let ready = QTGate(), done = QTGate()
            let waitedLong = QTFlag()
            queue.addOperation {
                ready.open()
                while !go.load(ordering: .acquiring) {}
                let t0 = qtMonotonicSeconds()
                _ = semaphore.wait(timeout: .seconds(qtDeadline))  // a stand-in would run the signaller in ms
                if qtMonotonicSeconds() - t0 > qtDeadline / 2 { waitedLong.set() }
                done.open()
            }
            queue.addOperation { semaphore.signal() }  // behind the waiter: needs a second thread if it waits
            guard ready.wait() else { stranded = -1; break }
            go.store(true, ordering: .releasing)
            // The test thread contends (released by the signaller if it loses).
            guard semaphore.wait(timeout: .seconds(2 * qtDeadline)) else { stranded = -1; break }
            guard done.wait(seconds: 2 * qtDeadline) else { stranded = -1; break }
            if waitedLong.isSet { stranded += 1 }
        }
        qtDrain(queue)
        #expect(stranded == 0, "after \(iterations) iterations a pool thread parked unseen on a lost permit")
    }

    /// Lost work on a small pool: several queues of different widths share two threads; operations depend on earlier
    /// ones across queues, queues are suspended and resumed and their widths changed while work arrives, barriers are
    /// mixed in. Every operation must run exactly once, after its dependencies finished, and every queue drain.
    @Test func manyQueuesOnTwoThreadsLoseNoWorkAndKeepDependencyOrder() throws {
        let pool = try SpindleThreadPool(name: "probe-stress", threadCount: 2)
        let widths = [1, 1, 2, 3, -1, 1]
        let queues = try widths.enumerated().map { i, w in
            w < 0 ? SpindleOperationQueue(name: "s\(i)", pool: pool)
                : try SpindleOperationQueue(name: "s\(i)", maxConcurrentOperationCount: w, pool: pool)
        }
        let total = 3000
        let record = PPRecord(total)
        let orderViolations = QTCounter()
        var ops: [SpindleOperation] = []
        var deps: [[Int]] = []
        var rng = SystemRandomNumberGenerator()
        for i in 0..<total {
            var mine: [Int] = []
            if i > 0 {
                for _ in 0..<Int.random(in: 0...2, using: &rng) { mine.append(Int.random(in: max(0, i - 50)..<i, using: &rng)) }
            }
            let myDeps = mine
            let op = SpindleBlockOperation {
                for d in myDeps where !record.isDone(d) { orderViolations.increment() }
                record.ran(i)
            }
            op.queuePriority = [.veryLow, .low, .normal, .high, .veryHigh][Int.random(in: 0..<5, using: &rng)]
            for d in myDeps { try op.addDependency(ops[d]) }
            ops.append(op)
            deps.append(myDeps)
            let q = queues[Int.random(in: 0..<queues.count, using: &rng)]
            try q.addOperation(op)
            switch Int.random(in: 0..<40, using: &rng) {
            case 0: q.isSuspended.toggle()
            case 1: try q.setMaxConcurrentOperationCount(Int.random(in: 1...4, using: &rng))
            case 2: _ = q.addBarrierBlock {}
            default: break
            }
        }
        for q in queues { q.isSuspended = false }
        for q in queues { qtDrain(q) }
        let lost = (0..<total).filter { record.runs($0) != 1 }
        #expect(lost.isEmpty, "operations not run exactly once: \(lost.prefix(10)) (\(ops.filter { !$0.isFinished }.count) unfinished)")
        #expect(orderViolations.count == 0)
    }
}

extension PoolProbeTests {
    /// Stand-ins under churn: on a one-thread pool, operations of several queues each add work to a leaf queue on the
    /// same pool and wait for it (an operation's wait, a semaphore, a wait group, `addOperationAndWait`: all waits the
    /// pool sees), so stand-ins start and retire all the time. Everything must finish; the pool must end at one thread.
    @Test func nestedWaitsOnAOneThreadPoolAlwaysFinish() throws {
        let pool = try SpindleThreadPool(name: "probe-nested", threadCount: 1)
        let leaf = try SpindleOperationQueue(name: "leaf", maxConcurrentOperationCount: 2, pool: pool)
        let queues = try (0..<4).map { try SpindleOperationQueue(name: "n\($0)", maxConcurrentOperationCount: $0 + 1, pool: pool) }
        let total = 800
        let finished = QTCounter(), failures = QTCounter()
        for i in 0..<total {
            queues[i % queues.count].addOperation {
                switch i % 4 {
                case 0:
                    let child = leaf.addOperation {}
                    if (try? child.waitUntilFinished(timeout: .seconds(qtDeadline))) != true { failures.increment() }
                case 1:
                    let semaphore = try! SpindleSemaphore(value: 0)
                    leaf.addOperation { semaphore.signal() }
                    if !semaphore.wait(timeout: .seconds(qtDeadline)) { failures.increment() }
                case 2:
                    let group = SpindleWaitGroup()
                    group.enter()
                    leaf.addOperation { try? group.leave() }
                    if !group.wait(timeout: .seconds(qtDeadline)) { failures.increment() }
                default:
                    if (try? leaf.addOperationAndWait { 1 }) != 1 { failures.increment() }
                }
                finished.increment()
            }
        }
        for q in queues { qtDrain(q) }
        qtDrain(leaf)
        #expect(finished.count == total)
        #expect(failures.count == 0)
        #expect(qtWaitUntil { pool.liveThreadCount == 1 }, "live threads stayed at \(pool.liveThreadCount)")
    }
}

extension PoolProbeTests {
    /// A pool thread that blocks in a bounded queue's add (waiting for room) or in a batch wait, both for work on the
    /// same one-thread pool: the pool must let a stand-in serve.
    @Test func aBlockingAddAndABatchWaitOnAOneThreadPoolAreStoodIn() throws {
        let pool = try SpindleThreadPool(name: "probe-add", threadCount: 1)
        let outer = SpindleOperationQueue(name: "outer", pool: pool)
        let bounded = try SpindleOperationQueue(name: "bounded", maxConcurrentOperationCount: 1, pool: pool)
        try bounded.setCapacity(1, whenFull: .block)
        let added = QTFlag(), batched = QTFlag()
        outer.addOperation {
            do {
                try bounded.addOperation(SpindleBlockOperation {}, timeout: .seconds(qtDeadline))
                try bounded.addOperation(SpindleBlockOperation {}, timeout: .seconds(qtDeadline))  // waits for room
                added.set()
                try bounded.addOperations([SpindleBlockOperation {}], waitUntilFinished: true)
                batched.set()
            } catch {}
        }
        qtDrain(outer)
        qtDrain(bounded)
        #expect(added.isSet)
        #expect(batched.isSet)
    }
}

extension PoolProbeTests {
    /// `SpindleRunLoopThread.shutdown` on a pool thread waits for the loop's current callout; when that callout waits
    /// for work on the same pool, the shutdown's wait (a bare condition wait, not told to the pool) holds the pool's
    /// only thread and the work never gets one, as a queue's `awaitTermination` there would not.
    @Test func shuttingDownARunLoopThreadFromThePoolWhileItsCalloutWaitsForThePool() throws {
        let pool = try SpindleThreadPool(name: "probe-rl", threadCount: 1)
        let outer = SpindleOperationQueue(name: "rl-outer", pool: pool)
        let inner = SpindleOperationQueue(name: "rl-inner", pool: pool)
        let loop = try SpindleRunLoopThread(name: "probe-rl")
        let calloutStarted = QTGate(), outerRunning = QTGate(), innerRan = QTGate()
        let joined = QTFlag()
        loop.runLoop.perform {
            calloutStarted.open()
            guard outerRunning.wait() else { return }  // the pool's only thread is taken by the shutdown below
            let work = inner.addOperation { innerRan.open() }
            _ = try? work.waitUntilFinished(timeout: .seconds(2 * qtDeadline))  // ends the hang after the detector
        }
        #expect(calloutStarted.wait())
        outer.addOperation {
            outerRunning.open()
            if (try? loop.shutdown(until: .after(.seconds(3 * qtDeadline)))) == true { joined.set() }
        }
        #expect(innerRan.wait(), "the callout's operation never got a pool thread while the shutdown waited")
        qtDrain(outer)
        qtDrain(inner)
        #expect(joined.isSet)
    }
}

extension PoolProbeTests {
    /// `SpindleThread.join()` on a pool thread, joining a thread that waits for work on the same pool: the join is not
    /// told to the pool, so the work never gets its only thread.
    @Test func joiningAThreadThatWaitsForThePoolFromThePool() throws {
        let pool = try SpindleThreadPool(name: "probe-join", threadCount: 1)
        let outer = SpindleOperationQueue(name: "join-outer", pool: pool)
        let inner = SpindleOperationQueue(name: "join-inner", pool: pool)
        let outerRunning = QTGate(), innerRan = QTGate()
        let joined = QTFlag()
        let thread = try SpindleThread.spawnJoinable(name: "probe-joinee") {
            guard outerRunning.wait() else { return }
            let work = inner.addOperation { innerRan.open() }
            _ = try? work.waitUntilFinished(timeout: .seconds(2 * qtDeadline))
        }
        outer.addOperation {
            outerRunning.open()
            if (try? thread.join()) != nil { joined.set() }
        }
        #expect(innerRan.wait(), "the joined thread's operation never got a pool thread while the join waited")
        qtDrain(outer)
        qtDrain(inner)
        #expect(joined.isSet)
    }
}

/// Per-operation run counts for the stress probe, under a lock.
final class PPRecord: @unchecked Sendable {
    private let lock = QTLock()
    private var counts: [Int]  // protected by lock
    init(_ n: Int) { self.counts = Array(repeating: 0, count: n) }
    func ran(_ i: Int) { self.lock.withLock { self.counts[i] += 1 } }
    func isDone(_ i: Int) -> Bool { self.lock.withLock { self.counts[i] > 0 } }
    func runs(_ i: Int) -> Int { self.lock.withLock { self.counts[i] } }
}
