import Synchronization
import Testing

@testable import Spindle

/// The seeds' queue programs, ported: seed 000 §7.12 (two invocation operations, then two `SimpleOperation`s, on
/// a queue) and seed 004 (a queue with `maxConcurrentOperationCount = 2` running upload operations that wait on a
/// semaphore and can be cancelled).
@Suite struct QueueSeedTests {
    /// The seed's app delegate: two entry methods that log their parameter and thread.
    final class AppDelegate: @unchecked Sendable {
        let entries = QTLog<String>()
        let tids = QTLog<Int32>()
        let meeting = QTRendezvous(parties: 2)
        func firstOperationEntry(_ parameter: Int) -> Int {
            self.entries.append("firstOperationEntry \(parameter)")
            self.tids.append(qtTid())
            _ = self.meeting.arrive()
            return parameter
        }
        func secondOperationEntry(_ parameter: Int) -> Int {
            self.entries.append("secondOperationEntry \(parameter)")
            self.tids.append(qtTid())
            _ = self.meeting.arrive()
            return parameter
        }
    }

    @Test func seed000TwoInvocationOperationsRunOnTwoThreadsOtherThanTheAddingOne() throws {
        let delegate = AppDelegate()
        let first = SpindleInvocationOperation(target: delegate, method: AppDelegate.firstOperationEntry, argument: 111)
        let second = SpindleInvocationOperation(target: delegate, method: AppDelegate.secondOperationEntry,
                                                argument: 222)
        // The seed uses a default queue; on a one-CPU machine the default width would be 1, so ask for 2 there.
        let queue = SpindleOperationQueue()
        if spindleActiveProcessorCount() < 2 { try queue.setMaxConcurrentOperationCount(2) }
        try queue.addOperation(first)
        try queue.addOperation(second)
        // "Main thread is here": the adding thread is not blocked by the operations.
        let adder = qtTid()
        qtDrain(queue)
        #expect(Set(delegate.entries.all) == ["firstOperationEntry 111", "secondOperationEntry 222"])
        let tids = delegate.tids.all
        #expect(tids.count == 2)
        #expect(Set(tids).count == 2, "each invocation operation runs on its own thread")
        #expect(!tids.contains(adder))
        #expect(try first.result() == 111)
        #expect(try second.result() == 222)
        #expect(first.target === delegate)
    }

    /// The seed's `SimpleOperation`: a concurrent operation whose `main` loops until its task is done or it is
    /// cancelled, then reports finished.
    final class SimpleOperation: SpindleConcurrentOperation, @unchecked Sendable {
        let givenObject: Int
        let log: QTLog<String>
        let tids: QTLog<Int32>
        init(object: Int = 123, log: QTLog<String>, tids: QTLog<Int32>) {
            self.givenObject = object
            self.log = log
            self.tids = tids
            super.init()
        }
        override func main() throws {
            var taskIsFinished = false
            while !taskIsFinished && !self.isCancelled {
                self.log.append("Parameter Object = \(self.givenObject)")
                self.tids.append(qtTid())
                taskIsFinished = true
            }
            try self.finish()
        }
    }

    @Test func seed000SimpleOperationsRunConcurrentlyOnAQueue() throws {
        let log = QTLog<String>(), tids = QTLog<Int32>()
        let first = SimpleOperation(object: 111, log: log, tids: tids)
        let second = SimpleOperation(object: 222, log: log, tids: tids)
        #expect(first.isAsynchronous)
        let queue = SpindleOperationQueue()
        try queue.addOperation(first)
        try queue.addOperation(second)
        let adder = qtTid()
        qtDrain(queue)
        #expect(Set(log.all) == ["Parameter Object = 111", "Parameter Object = 222"])
        #expect(first.isFinished && second.isFinished)
        #expect(!first.isExecuting && !second.isExecuting)
        #expect(!tids.all.contains(adder))
        #expect(Set(tids.all).count == 2, "each concurrent operation runs its main on its own thread")
        // The default init of the seed ("initWithObject:@123").
        let defaulted = SimpleOperation(log: log, tids: tids)
        #expect(defaulted.givenObject == 123)
    }

    /// Seed 004's `RecipetUploadOperation`: two uploads whose callbacks come on another thread; `main` waits on a
    /// semaphore for each, and `cancel` signals it so a cancelled upload stops waiting.
    final class RecipeUploadOperation: SpindleOperation, @unchecked Sendable {
        let semaphore = QTGate()
        let entered = QTGate()
        let log: QTLog<String>
        let running: QTHighWater
        let label: String
        let holdFirstUpload: QTGate?
        init(_ label: String, log: QTLog<String>, running: QTHighWater, holdFirstUpload: QTGate? = nil) {
            self.label = label
            self.log = log
            self.running = running
            self.holdFirstUpload = holdFirstUpload
            super.init()
            self.name = label
        }
        private func upload(_ what: String, hold: QTGate?) throws {
            let semaphore = self.semaphore
            try SpindleThread.detach(name: "qt-upload") {
                hold?.wait()
                semaphore.open()  // the API's callback
            }
            semaphore.wait()
        }
        override func main() throws {
            self.running.enter()
            defer { self.running.leave() }
            self.entered.open()
            try self.upload("image", hold: self.holdFirstUpload)
            self.log.append("\(self.label): image")
            if self.isCancelled { return }
            try self.upload("JSON", hold: nil)
            self.log.append("\(self.label): JSON")
        }
        override func cancel() {
            super.cancel()
            self.semaphore.open()
        }
    }

    @Test func seed004QueueWithMaxConcurrentOperationCountTwo() throws {
        let queue = SpindleOperationQueue()
        try queue.setMaxConcurrentOperationCount(2)
        #expect(queue.maxConcurrentOperationCount == 2)
        let log = QTLog<String>()
        let running = QTHighWater()
        let ops = (0..<6).map { RecipeUploadOperation("recipe\($0)", log: log, running: running) }
        for op in ops { try queue.addOperation(op) }
        qtDrain(queue)
        #expect(running.maximum <= 2)
        #expect(log.count == 12)
        for op in ops {
            #expect(log.all.filter { $0.hasPrefix("\(op.label):") } == ["\(op.label): image", "\(op.label): JSON"])
        }
    }

    @Test func seed004CancellingAnUploadStopsItsWait() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let log = QTLog<String>()
        let running = QTHighWater()
        let neverCallsBack = QTGate()  // the image callback of `stuck` only comes when the test ends
        let stuck = RecipeUploadOperation("stuck", log: log, running: running, holdFirstUpload: neverCallsBack)
        let fine = RecipeUploadOperation("fine", log: log, running: running)
        let queued = RecipeUploadOperation("queued", log: log, running: running)
        try queue.addOperations([stuck, fine])
        #expect(stuck.entered.wait())
        #expect(try fine.waitUntilFinished(timeout: .seconds(qtDeadline)))
        try queue.addOperation(queued)
        // The seed cancels everything pending; `stuck` wakes from its semaphore and returns early.
        queue.cancelAllOperations()
        qtDrain(queue)
        neverCallsBack.open()
        #expect(stuck.isFinished && stuck.isCancelled)
        #expect(log.all.filter { $0.hasPrefix("stuck") } == ["stuck: image"])
        #expect(log.all.filter { $0.hasPrefix("fine") } == ["fine: image", "fine: JSON"])
        #expect(queued.isFinished && (queued.isCancelled || log.all.contains("queued: JSON")))
        #expect(running.maximum <= 2)
    }
}
