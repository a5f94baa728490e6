import CShim
import Synchronization
import Testing
@testable import Spindle

// The seeds' programs, ported: seed 000 (section 7.11, "running tasks synchronously with operations") and seed 003
// (custom non-concurrent VinnyOperation and concurrent MyOperation). NSLog lines become entries of a log; the
// seeds' sleeps become nothing or a gate.

/// Seed 000: the application delegate whose `simpleOperationEntry:` the invocation operation calls.
private final class AppDelegate: @unchecked Sendable {
    let log = OpLog<String>()
    let entryThreadID = OpCounter(-1)
    let entryThread = OpBox<SpindleThread?>(nil)

    func simpleOperationEntry(_ paramObject: Int) {
        self.log.add("Parameter Object = \(paramObject)")
        self.entryThreadID.store(Int(cshim_gettid()))
        self.entryThread.value = SpindleThread.current
    }
}

/// Seed 000: CountingOperation, counting from startingCount to endingCount - 1 unless cancelled.
private final class CountingOperation: SpindleOperation, @unchecked Sendable {
    let startingCount: Int
    let endingCount: Int
    let log: OpLog<String>
    let threadID = OpCounter(-1)

    init(startingCount: Int = 0, endingCount: Int = 1000, log: OpLog<String>) {
        self.startingCount = startingCount
        self.endingCount = endingCount
        self.log = log
        super.init()
    }

    override func main() throws {
        var taskIsFinished = false
        while !taskIsFinished && !self.isCancelled {
            self.threadID.store(Int(cshim_gettid()))
            for counter in self.startingCount..<self.endingCount { self.log.add("Count = \(counter)") }
            taskIsFinished = true
        }
    }
}

/// Seed 003: the non-concurrent VinnyOperation.
private final class VinnyOperation: SpindleOperation, @unchecked Sendable {
    let log: OpLog<String>
    let threadID = OpCounter(-1)
    init(log: OpLog<String>) {
        self.log = log
        super.init()
    }

    override func main() throws {
        self.log.add("main begin")
        var taskIsFinished = false
        while !taskIsFinished && !self.isCancelled {
            self.threadID.store(Int(cshim_gettid()))  // the seed's sleep(10) and thread printout
            taskIsFinished = true
        }
        self.log.add("main end")
    }
}

/// Seed 003: the concurrent MyOperation. Its `main` waits (with a deadline) for the test to have logged
/// "start after": if performing it ran `main` on the calling thread, the log order would come out wrong.
private final class MyOperation: SpindleConcurrentOperation, @unchecked Sendable {
    let log: OpLog<String>
    let gate = opSemaphore()
    let threadID = OpCounter(-1)
    init(log: OpLog<String>) {
        self.log = log
        super.init()
    }

    override func main() throws {
        _ = self.gate.wait(timeout: opDeadline)
        self.log.add("main begin")
        var taskIsFinished = false
        while !taskIsFinished && !self.isCancelled {
            self.threadID.store(Int(cshim_gettid()))
            taskIsFinished = true
        }
        try self.finish()  // the seed's completeOperation
        self.log.add("main end")
    }
}

@Suite struct OperationSeedTests {
    // Seed 000, 7.11: an invocation operation started by hand runs its method on the calling thread.
    @Test func invocationOperationRunByHandRunsOnTheCallingThread() throws {
        let delegate = AppDelegate()
        let simpleOperation = SpindleInvocationOperation(
            target: delegate, method: AppDelegate.simpleOperationEntry, argument: 123)
        try simpleOperation.start()
        #expect(delegate.log.all == ["Parameter Object = 123"])
        #expect(delegate.entryThreadID.value == Int(cshim_gettid()), "Current Thread = Main Thread")
        #expect(delegate.entryThread.value === SpindleThread.current)
        #expect(simpleOperation.isFinished)
        #expect(opErrorCase { try simpleOperation.result() } == "voidResult")
    }

    // Seed 000, 7.11: a block operation counting 0…999 blocks the caller; "Main thread is here" comes after 999.
    @Test func blockOperationCountsBeforeTheCallerContinues() throws {
        let log = OpLog<String>()
        let blockThreadID = OpCounter(-1)
        let simpleOperation = SpindleBlockOperation {
            blockThreadID.store(Int(cshim_gettid()))
            for counter in 0..<1000 { log.add("Count = \(counter)") }
        }
        try simpleOperation.start()
        log.add("Main thread is here")
        #expect(log.all == (0..<1000).map { "Count = \($0)" } + ["Main thread is here"])
        #expect(blockThreadID.value == Int(cshim_gettid()), "the block ran on the thread that started it")
        #expect(simpleOperation.isFinished)
    }

    // Seed 000, 7.11: CountingOperation gives the same output as the block operation.
    @Test func countingOperationCountsBeforeTheCallerContinues() throws {
        let log = OpLog<String>()
        let simpleOperation = CountingOperation(startingCount: 0, endingCount: 1000, log: log)
        try simpleOperation.start()
        log.add("Main thread is here")
        #expect(log.all == (0..<1000).map { "Count = \($0)" } + ["Main thread is here"])
        #expect(simpleOperation.threadID.value == Int(cshim_gettid()))
        #expect(simpleOperation.isFinished && !simpleOperation.isExecuting)
    }

    @Test func cancelledCountingOperationCountsNothing() throws {
        let log = OpLog<String>()
        let simpleOperation = CountingOperation(log: log)
        simpleOperation.cancel()
        try simpleOperation.start()
        log.add("Main thread is here")
        #expect(log.all == ["Main thread is here"])
        #expect(simpleOperation.isFinished)
    }

    // Seed 003, part 1: VinnyOperation's main runs between "start before" and "start after", on the same thread.
    @Test func vinnyOperationRunsSynchronouslyOnTheCallingThread() throws {
        let log = OpLog<String>()
        let op = VinnyOperation(log: log)
        log.add("start before")
        try op.start()
        log.add("start after")
        #expect(log.all == ["start before", "main begin", "main end", "start after"])
        #expect(op.threadID.value == Int(cshim_gettid()))
        #expect(op.isFinished)
    }

    // Seed 003, part 2: MyOperation performed by hand (performOperation:) runs main on another thread, and
    // "start after" is logged before "main begin".
    @Test func myOperationPerformedRunsOnAnotherThreadAfterTheCallerContinues() throws {
        let log = OpLog<String>()
        let op = MyOperation(log: log)
        let completed = opSemaphore()
        op.completionBlock = { completed.signal() }
        log.add("start before")
        #expect(SpindleOperation.perform(op))
        log.add("start after")
        op.gate.signal()
        #expect(try op.waitUntilFinished(timeout: opDeadline))
        #expect(completed.wait(timeout: .zero))
        #expect(Array(log.all.prefix(3)) == ["start before", "start after", "main begin"])
        #expect(op.threadID.value != Int(cshim_gettid()), "main ran on another thread")
        #expect(op.threadID.value > 0)
        #expect(op.isFinished && !op.isExecuting)
        #expect(op.error == nil)
    }

    // Seed 003's performOperation: branches: a cancelled operation is moved to finished; a not-ready one is not run.
    @Test func performFinishesACancelledOperationAndSkipsANotReadyOne() throws {
        let log = OpLog<String>()
        let cancelled = MyOperation(log: log)
        cancelled.cancel()
        #expect(SpindleOperation.perform(cancelled))
        #expect(cancelled.isFinished)
        let blocker = SpindleOperation()
        let waiting = MyOperation(log: log)
        try waiting.addDependency(blocker)
        #expect(!SpindleOperation.perform(waiting))
        #expect(!waiting.isExecuting && !waiting.isFinished)
        #expect(log.all.isEmpty, "neither main ran")
    }

    @Test func performRunsASynchronousOperationOnTheCallingThread() throws {
        let log = OpLog<String>()
        let op = VinnyOperation(log: log)
        log.add("start before")
        #expect(SpindleOperation.perform(op))
        log.add("start after")
        #expect(log.all == ["start before", "main begin", "main end", "start after"])
        #expect(op.threadID.value == Int(cshim_gettid()))
    }
}
