import CShim
import Synchronization
import Testing
@testable import Spindle

/// SEMANTICS C21–C25: block operations (blocks run concurrently; Part 1 item 5). Serialized: the helper-pool
/// tests (BlockHelperPoolTests.swift) count the threads the process-wide pool creates.
@Suite(.serialized) struct BlockOperationTests {
    // C21
    @Test func addedBlocksAreListedAndEachRunsOnce() throws {
        let runs = (OpCounter(), OpCounter())
        let op = SpindleBlockOperation { runs.0.increment() }
        try op.addExecutionBlock { runs.1.increment() }
        #expect(op.executionBlocks.count == 2)
        try op.start()
        #expect(runs.0.value == 1)
        #expect(runs.1.value == 1)
        #expect(op.isFinished)
    }

    @Test func manyMoreBlocksThanHelperThreadsEachRunOnce() throws {
        let count = SpindleBlockOperation.maximumHelperThreads * 2 + 7
        let runs = (0..<count).map { _ in OpCounter() }
        let op = SpindleBlockOperation()
        for counter in runs { try op.addExecutionBlock { counter.increment() } }
        #expect(op.executionBlocks.count == count)
        try op.start()
        let allOnce = runs.allSatisfy { $0.value == 1 }
        #expect(allOnce, "\(runs.map(\.value))")
        #expect(op.isFinished)
    }

    @Test func oneBlockAddedToAnEmptyOperationRunsOnceOnTheCallingThreadAndStaysListed() throws {
        let runs = OpCounter()
        let tid = OpCounter()
        let op = SpindleBlockOperation()
        try op.addExecutionBlock {
            runs.increment()
            tid.store(Int(cshim_gettid()))
        }
        try op.start()
        #expect(runs.value == 1)
        #expect(tid.value == Int(cshim_gettid()))
        #expect(op.executionBlocks.count == 1, "blocks stay listed after the run")
    }

    @Test func theInitialBlockStaysListedAfterTheRun() throws {
        let runs = OpCounter()
        let op = SpindleBlockOperation { runs.increment() }
        try op.start()
        #expect(runs.value == 1)
        #expect(op.executionBlocks.count == 1)
    }

    @Test func anOperationWithoutBlocksFinishes() throws {
        let op = SpindleBlockOperation()
        #expect(op.executionBlocks.isEmpty)
        try op.start()
        #expect(op.isFinished)
    }

    @Test func aSingleBlockRunsOnTheCallingThread() throws {
        let tid = OpCounter()
        let op = SpindleBlockOperation { tid.store(Int(cshim_gettid())) }
        try op.start()
        #expect(tid.value == Int(cshim_gettid()))
    }

    // C22: it finishes only after every block has returned (and the completion block sees them all done).
    @Test func finishesOnlyAfterEveryBlockReturned() throws {
        let slowEntered = opSemaphore()
        let gate = opSemaphore()
        let returned = OpCounter()
        let fastReturned = opSemaphore()
        let op = SpindleBlockOperation {
            slowEntered.signal()
            _ = gate.wait(timeout: opDeadline)
            returned.increment()
        }
        for _ in 0..<3 {
            try op.addExecutionBlock {
                returned.increment()
                fastReturned.signal()
            }
        }
        let seenByCompletion = OpBox(-1)
        op.completionBlock = { seenByCompletion.value = returned.value }
        let runner = try OpThread.run { try? op.start() }
        #expect(slowEntered.wait(timeout: opDeadline))
        for _ in 0..<3 { #expect(fastReturned.wait(timeout: opDeadline)) }
        #expect(!op.isFinished, "one block is still running")
        #expect(op.isExecuting)
        #expect(try op.waitUntilFinished(timeout: .milliseconds(50)) == false)
        gate.signal()
        #expect(try op.waitUntilFinished(timeout: opDeadline))
        #expect(returned.value == 4)
        #expect(seenByCompletion.value == 4)
        #expect(runner.finish())
    }

    // C23: blocks run at the same time. Each waits, with a deadline, until every block has arrived: this can only
    // succeed when all of them are running at once (a serial implementation times out).
    @Test(arguments: [2, 4, 8])
    func blocksRunConcurrently(blockCount: Int) throws {
        let arrived = OpCounter()
        let turnstile = opSemaphore()
        let metEveryone = OpCounter()
        let threads = BlockTidLog()  // not OpLog: see BlockTidLog
        let op = SpindleBlockOperation()
        for _ in 0..<blockCount {
            try op.addExecutionBlock {
                threads.add(cshim_gettid())
                if arrived.increment() == blockCount {
                    for _ in 0..<blockCount { turnstile.signal() }
                }
                if turnstile.wait(timeout: opDeadline) { metEveryone.increment() }
            }
        }
        try op.start()
        #expect(metEveryone.value == blockCount, "every block saw all \(blockCount) blocks running at once")
        #expect(Set(threads.all).count == blockCount, "each block on its own thread")
        #expect(op.isFinished)
    }

    @Test func twoBlocksWaitingForEachOtherBothComplete() throws {
        let a = opSemaphore()
        let b = opSemaphore()
        let ok = (OpBox(false), OpBox(false))
        let op = SpindleBlockOperation {
            a.signal()
            ok.0.value = b.wait(timeout: opDeadline)
        }
        try op.addExecutionBlock {
            b.signal()
            ok.1.value = a.wait(timeout: opDeadline)
        }
        try op.start()
        #expect(ok.0.value)
        #expect(ok.1.value)
    }

    // C24
    @Test func addExecutionBlockAfterStartThrows() throws {
        let duringRun = OpBox<String?>("unset")
        let holder = OpBox<SpindleBlockOperation?>(nil)
        let op = SpindleBlockOperation {
            duringRun.value = opErrorCase { try holder.value!.addExecutionBlock {} }
        }
        holder.value = op
        op.name = "blocks"
        try op.start()
        #expect(duringRun.value == "blockOperationStarted", "rejected while executing")
        #expect(opErrorCase { try op.addExecutionBlock {} } == "blockOperationStarted", "rejected once finished")
        do {
            try op.addExecutionBlock {}
        } catch {
            #expect(opErrorName(error) == "blocks")
        }
        #expect(op.executionBlocks.count == 1, "a rejected block is not added")
        holder.value = nil
    }

    @Test func addExecutionBlockBeforeStartIsAccepted() throws {
        let op = SpindleBlockOperation()
        op.cancel()
        #expect(opErrorCase { try op.addExecutionBlock {} } == nil, "cancelled but not started: still accepted")
        #expect(op.executionBlocks.count == 1)
    }

    // C25
    @Test func cancelledBlockOperationRunsNoBlock() throws {
        let runs = OpCounter()
        let op = SpindleBlockOperation { runs.increment() }
        try op.addExecutionBlock { runs.increment() }
        let completions = OpCounter()
        op.completionBlock = { completions.increment() }
        op.cancel()
        try op.start()
        #expect(runs.value == 0)
        #expect(op.isFinished)
        #expect(completions.value == 1)
    }

    /// A block on a helper thread runs as its operation: `current` is the operation, the queue running it is the
    /// current queue, waiting for the operation throws `waitOnSelf` and waiting for that queue `waitOnOwnQueue`,
    /// as on the operation's own thread (before, both waited for themselves: for ever without a timeout).
    @Test func aBlockOnAHelperThreadRunsAsItsOperation() throws {
        let queue = try SpindleOperationQueue(name: "block-helper-context", maxConcurrentOperationCount: 1)
        let helperDone = opSemaphore()
        let seen = OpLog<String>()
        let tids = (OpCounter(), OpCounter())
        let box = OpBox<SpindleBlockOperation?>(nil)  // the blocks must not retain their own operation
        let op = SpindleBlockOperation {
            tids.0.store(Int(cshim_gettid()))
            // Hold the operation's own thread here until the other block has run, so a helper must run it.
            seen.add("helper came: \(helperDone.wait(timeout: opDeadline))")
        }
        try op.addExecutionBlock {
            tids.1.store(Int(cshim_gettid()))
            let op = box.value!
            seen.add("current is the operation: \(SpindleOperation.current === op)")
            seen.add("current queue: \(SpindleOperationQueue.current === queue)")
            seen.add("wait for it: \(opErrorCase { _ = try op.waitUntilFinished(timeout: opDeadline) } ?? "none")")
            seen.add("wait for its queue: "
                + "\(opErrorCase { _ = try queue.waitUntilAllOperationsAreFinished(timeout: opDeadline) } ?? "none")")
            helperDone.signal()
        }
        box.value = op
        try queue.addOperation(op)
        #expect(try op.waitUntilFinished(timeout: opDeadline))
        box.value = nil
        #expect(tids.0.value != tids.1.value, "the second block ran on a helper thread")
        #expect(Set(seen.all) == [
            "helper came: true", "current is the operation: true", "current queue: true",
            "wait for it: waitOnSelf", "wait for its queue: waitOnOwnQueue",
        ])
    }
}
