import CShim
import Glibc
import Synchronization
import Testing
@testable import Spindle

/// Block operations on the process-wide helper pool (`BlockHelperPool`): blocks still run concurrently, helper
/// threads are reused across runs and retire when idle, a blocked block stops nobody else, and an operation
/// finishes only after its helpers' blocks returned. Part of the serialized `BlockOperationTests` suite.
/// An append-only log of thread ids for blocks running at once. On `SpindleLockedValue` (a pthread mutex) rather
/// than `OpLog`: `Synchronization.Mutex` waits in the kernel when contended, where ThreadSanitizer cannot see the
/// hand-off, and blocks that meet all append at the same moment.
final class BlockTidLog: Sendable {
    private let entries = SpindleLockedValue<[Int32]>([])
    func add(_ tid: Int32) { self.entries.withLockedValue { $0.append(tid) } }
    var all: [Int32] { self.entries.value }
    var count: Int { self.entries.withLockedValue { $0.count } }
}

extension BlockOperationTests {
    /// An operation of `count` blocks that each wait (up to `opDeadline`) until all `count` are running; each
    /// block records its thread's kernel id and runs `body` first, and `met` counts the blocks that saw everyone.
    static func rendezvousOperation(_ count: Int, met: OpCounter, threads: BlockTidLog,
                                    body: @escaping @Sendable () -> Void = {}) throws -> SpindleBlockOperation {
        let arrived = OpCounter()
        let turnstile = opSemaphore()
        let op = SpindleBlockOperation()
        for _ in 0..<count {
            try op.addExecutionBlock {
                body()
                threads.add(cshim_gettid())
                if arrived.increment() == count {
                    for _ in 0..<count { turnstile.signal() }
                }
                if turnstile.wait(timeout: opDeadline) { met.increment() }
            }
        }
        return op
    }

    @Test func asManyBlocksAsTheHelperCapPlusOneRunAllAtOnce() throws {
        // The owner plus maximumHelperThreads helpers: every block blocks until all have started.
        let count = SpindleBlockOperation.maximumHelperThreads + 1
        let met = OpCounter()
        let threads = BlockTidLog()
        let op = try Self.rendezvousOperation(count, met: met, threads: threads)
        try op.start()
        #expect(met.value == count, "every block saw all \(count) running at once")
        #expect(Set(threads.all).count == count, "each block on its own thread")
        #expect(op.isFinished)
    }

    @Test func helperThreadsAreReusedAcrossRuns() throws {
        let runs = 50
        let pool = BlockHelperPool.shared
        let createdBefore = pool.createdCount
        let helperThreads = BlockTidLog()
        for _ in 0..<runs {
            let met = OpCounter()
            let threads = BlockTidLog()
            let op = try Self.rendezvousOperation(4, met: met, threads: threads)
            try op.start()
            #expect(met.value == 4, "the 4 blocks ran at once")
            for tid in threads.all where tid != cshim_gettid() { helperThreads.add(tid) }
        }
        let created = pool.createdCount - createdBefore
        // Each run needs 3 helpers at once; without reuse that is 150 threads (3 are created when this runs alone
        // on a cold pool). Other suites running in parallel may create a few helpers too, hence the slack.
        #expect(created <= 20, "\(created) helper threads created for \(runs) runs of 4 rendezvousing blocks")
        #expect(Set(helperThreads.all).count <= 20, "\(Set(helperThreads.all).count) distinct helper threads")
        #expect(helperThreads.count == runs * 3)
    }

    @Test func aBlockThatBlocksDoesNotStopTheOtherBlocks() throws {
        let gate = opSemaphore()
        let others = 20
        let othersDone = opSemaphore()
        let blockedEntered = opSemaphore()
        let op = SpindleBlockOperation {}
        try op.addExecutionBlock {
            blockedEntered.signal()
            _ = gate.wait(timeout: opDeadline)
        }
        for _ in 0..<others { try op.addExecutionBlock { othersDone.signal() } }
        let runner = try OpThread.run { try? op.start() }
        #expect(blockedEntered.wait(timeout: opDeadline))
        for _ in 0..<others { #expect(othersDone.wait(timeout: opDeadline), "the other blocks ran meanwhile") }
        #expect(!op.isFinished)
        gate.signal()
        #expect(try op.waitUntilFinished(timeout: opDeadline))
        #expect(runner.finish())
    }

    @Test func aHelperStuckInOneOperationDoesNotStopAnother() throws {
        // A's second block blocks on a helper thread; B, started meanwhile, still gets helpers of its own.
        let gate = opSemaphore()
        let stuck = opSemaphore()
        let a = SpindleBlockOperation {}
        try a.addExecutionBlock {
            stuck.signal()
            _ = gate.wait(timeout: opDeadline)
        }
        let runnerA = try OpThread.run { try? a.start() }
        #expect(stuck.wait(timeout: opDeadline))
        let met = OpCounter()
        let b = try Self.rendezvousOperation(4, met: met, threads: BlockTidLog())
        try b.start()
        #expect(met.value == 4, "B's blocks ran at once while A's helper was stuck")
        #expect(!a.isFinished)
        gate.signal()
        #expect(try a.waitUntilFinished(timeout: opDeadline))
        #expect(runnerA.finish())
    }

    // C22, with the slow block on a helper: the owner runs out of blocks first and must wait for the helper.
    @Test func finishesOnlyAfterAHelpersBlockReturned() throws {
        let slowEntered = opSemaphore()
        let ownerReturned = opSemaphore()
        let gate = opSemaphore()
        let returned = OpCounter()
        let ownerTid = OpCounter(-1)
        let slowTid = OpCounter(-1)
        // The owner's block returns only once the slow block has started, so the slow one is a helper's.
        let op = SpindleBlockOperation {
            ownerTid.store(Int(cshim_gettid()))
            _ = slowEntered.wait(timeout: opDeadline)
            returned.increment()
            ownerReturned.signal()
        }
        try op.addExecutionBlock {
            slowTid.store(Int(cshim_gettid()))
            slowEntered.signal()
            _ = gate.wait(timeout: opDeadline)
            returned.increment()
        }
        let seenByCompletion = OpCounter(-1)
        op.completionBlock = { seenByCompletion.store(returned.value) }
        let runner = try OpThread.run { try? op.start() }
        #expect(ownerReturned.wait(timeout: opDeadline))
        #expect(try op.waitUntilFinished(timeout: .milliseconds(50)) == false, "the helper's block still runs")
        #expect(op.isExecuting)
        gate.signal()
        #expect(try op.waitUntilFinished(timeout: opDeadline))
        #expect(returned.value == 2)
        #expect(seenByCompletion.value == 2)
        #expect(runner.finish())
        #expect(ownerTid.value != slowTid.value, "the slow block ran on a helper thread")
    }

    @Test func helperThreadsGetTheirNameAndPriorityBackAfterARun() throws {
        // Three blocks meet (so they run on three threads); those on helpers rename their thread and lower its
        // priority. Blocks of later runs, on helpers that may be the same threads, see the defaults again.
        let owner = cshim_gettid()
        let renamed = OpCounter()
        let arrived = OpCounter()
        let turnstile = opSemaphore()
        let renamer = SpindleBlockOperation()
        for _ in 0..<3 {
            try renamer.addExecutionBlock {
                if arrived.increment() == 3 { for _ in 0..<3 { turnstile.signal() } }
                _ = turnstile.wait(timeout: opDeadline)
                guard cshim_gettid() != owner else { return }
                SpindleThread.current.name = "renamed"
                SpindleThread.current.setPriority(0.2)
                renamed.increment()
            }
        }
        try renamer.start()
        #expect(renamed.value == 2)
        let seen = SpindleLockedValue<[String]>([])
        for _ in 0..<10 {
            let op = try Self.rendezvousOperation(3, met: OpCounter(), threads: BlockTidLog()) {
                let thread = SpindleThread.current
                if cshim_gettid() != owner { seen.withLockedValue { $0.append("\(thread.name) \(thread.priority)") } }
            }
            try op.start()
        }
        let names = seen.value
        #expect(names.count == 20, "two blocks of each run on helpers")
        #expect(names.allSatisfy { $0 == "\(BlockHelperPool.threadName) 0.5" }, "\(Set(names))")
    }

    @Test func aBlocksCapturesAreReleasedWithTheOperationNotByAHelper() throws {
        // Helpers (and requests still queued in the pool) may outlive the run; the blocks they ran must not: the
        // captures go when the operation goes, on the thread that lets go of it.
        let releasedOn = OpCounter(-1)
        do {
            let sentinel = BlockCaptureSentinel(releasedOn)
            let op = try Self.rendezvousOperation(4, met: OpCounter(), threads: BlockTidLog()) {
                withExtendedLifetime(sentinel) {}
            }
            try op.start()
            #expect(op.isFinished)
            #expect(releasedOn.value == -1, "the operation still holds its blocks")
        }
        #expect(releasedOn.value == Int(cshim_gettid()), "released here, when the operation was")
    }

    @Test func idleHelperThreadsRetire() throws {
        let pool = BlockHelperPool.shared
        let saved = pool.idleTimeout
        pool.idleTimeout = .milliseconds(50)
        defer { pool.idleTimeout = saved }
        let threads = BlockTidLog()
        let met = OpCounter()
        let op = try Self.rendezvousOperation(4, met: met, threads: threads)
        try op.start()
        #expect(met.value == 4)
        let helpers = threads.all.filter { $0 != cshim_gettid() }
        #expect(helpers.count == 3)
        // Helper threads have no signal to wait on when they exit: poll /proc with a generous deadline.
        #expect(waitUntil(deadline: 10) { helpers.allSatisfy { !taskExists(tid: $0) } }, "idle helpers exited")
    }
}

/// Records, when released, the kernel id of the thread that released it.
final class BlockCaptureSentinel: Sendable {
    let releasedOn: OpCounter
    init(_ releasedOn: OpCounter) { self.releasedOn = releasedOn }
    deinit { self.releasedOn.store(Int(cshim_gettid())) }
}
