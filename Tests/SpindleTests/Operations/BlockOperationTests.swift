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
}
