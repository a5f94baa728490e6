import Spindle
import SpindleExamplesKit
import Testing

/// Seed 002 (the Concurrency Programming Guide's chapter 3): the orders its text documents.
@Suite struct Seed002ExampleTests {
    @Test func invocationOperationResultIsTyped() throws {
        let (out, caller) = try runExampleOnCaller("task-with-data")
        let task = try #require(out.index(prefix: "myTaskMethod([1, 2, 3, 4]) on SpindleThread(spindle.w"))
        #expect(out.lines[task].threadID != caller.threadID)
        #expect(out.isOrdered(task, out.index(of: "result() = 10")))
        #expect(out.index(prefix: "myTaskMethod([5])") == nil)  // the cancelled one never calls the method
        #expect(out.texts.last?.hasPrefix("result() of a cancelled operation throws: ") == true)
    }

    @Test func blockOperationBlocksRunAtTheSameTime() throws {
        let out = try runExample("block-operation")
        #expect(out.texts.first == "Beginning operation.")
        var threads = Set<Int32>()
        for block in 1...3 {
            let index = try #require(out.index(prefix: "block \(block) on "))
            #expect(out.lines[index].text.hasSuffix("all three running at once: true"))
            threads.insert(out.lines[index].threadID)
        }
        #expect(threads.count == 3)
        let returned = out.index(of: "start() returned after every block: finished = true")
        #expect(out.indices(prefix: "block ").allSatisfy { $0 < (returned ?? -1) })
        #expect(out.texts.last?.contains("has started; no more blocks can be added") == true)
    }

    @Test func cancellationStopsTheRunningOneAndSkipsTheWaitingOne() throws {
        let out = try runExample("cancellation")
        let cancelAll = out.index(of: "cancelAllOperations()")
        #expect(out.isOrdered(out.index(of: "running: step 1"), cancelAll))
        #expect(out.isOrdered(cancelAll, out.index(prefix: "running: saw the cancel, stopping after step ")))
        #expect(out.index(prefix: "waiting: step") == nil)  // its main never ran
        #expect(out.texts.contains("waiting: completion block ran, cancelled = true"))
        #expect(out.texts.suffix(2) == [
            "running: cancelled = true, finished = true", "waiting: cancelled = true, finished = true",
        ])
    }

    @Test func dependencyRunsFirstEvenAcrossQueues() throws {
        let out = try runExample("dependencies")
        #expect(out.texts.first == "process is ready before the download finished: false")
        #expect(out.isOrdered(out.index(prefix: "download finished on "), out.index(of: "process runs after the download")))
        #expect(out.texts.contains(#"process.dependencies = ["download"]"#))
        #expect(out.texts.last?.hasPrefix("a cycle is refused when it is made: ") == true)
        #expect(out.texts.last?.contains("a -> b -> a") == true)
    }

    @Test func readyOperationsRunHighestPriorityFirst() throws {
        let out = try runExample("priorities")
        #expect(out.texts.map { String($0.prefix { $0 != " " }) } == ["high", "normal", "low", "prerequisite", "blocked"])
        #expect(out.texts[2] == "low (queuePriority .low, thread priority 0.25)")
        #expect(out.texts[0] == "high (queuePriority .high, thread priority 0.5)")
    }

    @Test func completionBlockRunsAfterMainAndBeforeWaitReturns() throws {
        let out = try runExample("completion-block")
        let main = out.index(prefix: "main: working on ")
        let completion = out.index(prefix: "completion block: finished = true, on ")
        #expect(out.isOrdered(main, completion))
        #expect(out.isOrdered(completion, out.index(of: "waitUntilFinished returned")))
        #expect(out.texts.contains("completionBlock is now nil"))
        #expect(out.texts.last == "completion block of a cancelled operation")
        #expect(!out.texts.contains("never printed"))
    }

    @Test func addOperationsWaitsForItsOwnOperationsOnly() throws {
        let out = try runExample("add-operations")
        let returned = try #require(out.index(of: "addOperations(_:waitUntilFinished: true) returned; anOp finished: false"))
        for i in 1...3 { #expect(out.isOrdered(out.index(of: "batch operation \(i)"), returned)) }
        #expect(out.isOrdered(returned, out.index(of: "anOp: long job done")))
        #expect(out.texts.contains("a block added with addOperation { }"))
        let refused = out.index(prefix: "a batch with a finished operation is refused: ")
        #expect(refused.map { out.lines[$0].text.hasSuffix("operationCount = 0") } == true)
        #expect(out.isOrdered(refused, out.index(of: "fresh: runs once added on its own")))
    }

    @Test func waitingReturnsAfterTheWorkAndRefusesSelfWaits() throws {
        let (out, caller) = try runExampleOnCaller("waiting")
        let waiter = try #require(out.index(of: "waiter thread: op finished = true"))
        #expect(out.lines[waiter].threadID != caller.threadID)
        #expect(out.isOrdered(out.index(of: "op: work done"), waiter))
        #expect(out.index(prefix: "waitUntilFinished() in its own main: ") != nil)
        #expect(out.index(prefix: "waitUntilAllOperationsAreFinished() on its own queue: ") != nil)
        #expect(out.texts.contains("waitUntilAllOperationsAreFinished returned; operationCount = 0"))
        #expect(out.texts.last == "waitUntilFinished(timeout: 50 ms) on an operation nobody runs: false")
    }

    @Test func suspendedQueueStartsNothingUntilResumed() throws {
        let out = try runExample("suspend-resume")
        #expect(out.texts == [
            "A starts",
            "queue suspended while A runs",
            "A ends",
            "A finished; B ran while the queue was suspended: false",
            "resuming the queue",
            "B runs",
        ])
    }
}
