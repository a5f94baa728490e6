import Testing

@testable import Spindle

/// Bounded queues: each policy alone and under contention, timed and async adds, batches, capacity changes.
@Suite struct BeyondBackpressureTests {
    /// A suspended queue of width 1 holding `count` named operations: full when `count == capacity`.
    func fullQueue(capacity: Int, policy: SpindleFullQueuePolicy, holding count: Int) throws
        -> (SpindleOperationQueue, [SpindleBlockOperation])
    {
        let queue = try SpindleOperationQueue(name: "bt-full", maxConcurrentOperationCount: 1, capacity: capacity,
                                              whenFull: policy)
        queue.isSuspended = true
        var held: [SpindleBlockOperation] = []
        for i in 0..<count {
            let op = qtNamed("held\(i)")
            try queue.addOperation(op)
            held.append(op)
        }
        return (queue, held)
    }

    // MARK: - Settings and misuse

    @Test func capacityIsSettableAndValidated() throws {
        let queue = SpindleOperationQueue(name: "bt-settings")
        #expect(queue.capacity == nil)
        #expect(queue.fullQueuePolicy == .block)
        try queue.setCapacity(3, whenFull: .reject)
        #expect(queue.capacity == 3)
        #expect(queue.fullQueuePolicy == .reject)
        qtExpectError(.invalidCapacity(0)) { try queue.setCapacity(0) }
        #expect(queue.capacity == 3)
        try queue.setCapacity(nil)
        #expect(queue.capacity == nil)
        #expect(queue.fullQueuePolicy == .reject)
        #expect(throws: SpindleError.self) { _ = try SpindleOperationQueue(capacity: -1) }
    }

    // MARK: - Reject

    @Test func rejectThrowsQueueFullAndLeavesTheOperationIdle() throws {
        let (queue, _) = try self.fullQueue(capacity: 2, policy: .reject, holding: 2)
        let extra = qtNamed("extra")
        qtExpectError(.queueFull(name: "bt-full", capacity: 2)) { try queue.addOperation(extra) }
        #expect(queue.operationCount == 2)
        #expect(!extra.isFinished && !extra.isExecuting)
        // Still idle: another queue takes it.
        let other = SpindleOperationQueue(name: "bt-other")
        try other.addOperation(extra)
        qtDrain(other)
        #expect(extra.isFinished)
        #expect(queue.snapshot().rejected == 1)
        queue.isSuspended = false
        qtDrain(queue)
    }

    // MARK: - Block

    @Test func blockedProducerIsReleasedWhenRoomAppears() throws {
        let (queue, held) = try self.fullQueue(capacity: 1, policy: .block, holding: 1)
        let extra = qtNamed("extra")
        let producer = try BTThread { try! queue.addOperation(extra) }
        btWaitForBlockedProducers(queue, 1)
        #expect(queue.operationCount == 1)
        #expect(!producer.done.tryWait())
        queue.isSuspended = false  // held0 finishes: room for extra
        #expect(producer.join())
        qtDrain(queue)
        #expect(held[0].isFinished && extra.isFinished)
        let snapshot = queue.snapshot()
        #expect(snapshot.finished == 2 && snapshot.blockedProducers == 0 && snapshot.highWaterOperationCount == 1)
    }

    @Test func blockedProducersAreServedFirstInFirstOut() throws {
        let (queue, _) = try self.fullQueue(capacity: 1, policy: .block, holding: 1)
        let order = QTLog<Int>()
        var producers: [BTThread] = []
        for i in 1...5 {
            let op = qtNamed("p\(i)") { order.append(i) }
            producers.append(try BTThread { try! queue.addOperation(op) })
            btWaitForBlockedProducers(queue, i)  // each one in line before the next arrives
        }
        queue.isSuspended = false
        for producer in producers { #expect(producer.join()) }
        qtDrain(queue)
        #expect(order.all == [1, 2, 3, 4, 5])
    }

    @Test func blockingAddFromOwnOperationThrowsInsteadOfWaitingForItself() throws {
        let queue = try SpindleOperationQueue(name: "bt-own", maxConcurrentOperationCount: 1, capacity: 1)
        let outcome = QTLog<String>()
        let inner = qtNamed("inner")
        try queue.addOperation(qtNamed("outer") {
            do {
                try queue.addOperation(inner)
                outcome.append("added")
            } catch {
                outcome.append("\(error)")
            }
        })
        qtDrain(queue)
        #expect(outcome.all == [SpindleError.waitOnOwnQueue(name: "bt-own").description])
        #expect(!inner.isFinished)
    }

    // MARK: - Timed adds

    @Test func timedAddThrowsQueueFullWhenItsDeadlinePasses() throws {
        let (queue, _) = try self.fullQueue(capacity: 1, policy: .reject, holding: 1)
        let extra = qtNamed("extra")
        let start = monotonicNanoseconds()
        qtExpectError(.queueFull(name: "bt-full", capacity: 1)) {
            try queue.addOperation(extra, timeout: .milliseconds(30))
        }
        #expect(monotonicNanoseconds() - start >= 30_000_000)  // never gives up early
        let snapshot = queue.snapshot()
        #expect(snapshot.blockedProducers == 0 && snapshot.operationCount == 1 && snapshot.rejected == 1)
        queue.isSuspended = false
        qtDrain(queue)
        try queue.addOperation(extra)  // it was left idle
        qtDrain(queue)
        #expect(extra.isFinished)
    }

    @Test func timedAddSucceedsWhenRoomAppearsInTime() throws {
        let (queue, _) = try self.fullQueue(capacity: 1, policy: .reject, holding: 1)
        let extra = qtNamed("extra")
        let producer = try BTThread { try! queue.addOperation(extra, until: .after(.seconds(qtDeadline))) }
        btWaitForBlockedProducers(queue, 1)
        queue.isSuspended = false
        #expect(producer.join())
        qtDrain(queue)
        #expect(extra.isFinished)
    }

    @Test func aWithdrawnHeadLetsTheProducersBehindItIn() async throws {
        let (queue, _) = try self.fullQueue(capacity: 3, policy: .block, holding: 2)
        // Head: a batch of 3 that cannot fit while 2 are held; behind it, one operation that would fit.
        let big = (0..<3).map { qtNamed("big\($0)") }
        let head = Task { try await queue.addOperationsWhenRoom(big) }
        await btAwaitBlockedProducers(queue, 1)
        let small = qtNamed("small")
        let behind = try BTThread { try! queue.addOperation(small) }
        await btAwaitBlockedProducers(queue, 2)
        #expect(queue.operationCount == 2)
        head.cancel()
        await #expect(throws: CancellationError.self) { try await head.value }
        #expect(behind.join())  // admitted as the head withdrew
        #expect(queue.operationCount == 3)
        #expect(big.allSatisfy { !$0.isFinished })
        queue.isSuspended = false
        qtDrain(queue)
        #expect(small.isFinished)
    }

    // MARK: - Caller runs

    @Test func callerRunsRunsTheOperationOnTheAddingThread() throws {
        let (queue, _) = try self.fullQueue(capacity: 1, policy: .callerRuns, holding: 1)
        let tid = QTLog<Int32>()
        let extra = qtNamed("extra") { tid.append(qtTid()) }
        try queue.addOperation(extra)
        #expect(extra.isFinished)
        #expect(tid.all == [qtTid()])
        let snapshot = queue.snapshot()
        #expect(snapshot.ranOnCaller == 1 && snapshot.operationCount == 1)
        queue.isSuspended = false
        qtDrain(queue)
    }

    // MARK: - Batches

    @Test func batchesAreAllOrNothing() throws {
        let (queue, _) = try self.fullQueue(capacity: 3, policy: .reject, holding: 2)
        let pair = [qtNamed("a"), qtNamed("b")]
        qtExpectError(.queueFull(name: "bt-full", capacity: 3)) { try queue.addOperations(pair) }
        #expect(queue.operationCount == 2)
        let four = (0..<4).map { qtNamed("f\($0)") }
        qtExpectError(.batchExceedsCapacity(name: "bt-full", count: 4, capacity: 3)) {
            try queue.addOperations(four)
        }
        // A batch that waits: admitted whole once both places are free.
        let producer = try BTThread { try! queue.addOperations(pair, until: .after(.seconds(qtDeadline))) }
        btWaitForBlockedProducers(queue, 1)
        #expect(queue.operationCount == 2)
        queue.isSuspended = false
        #expect(producer.join())
        qtDrain(queue)
        #expect(pair.allSatisfy { $0.isFinished })
        #expect(four.allSatisfy { !$0.isFinished })
        #expect(queue.snapshot().highWaterOperationCount <= 3)
    }

    // MARK: - Capacity changes and barriers

    @Test func raisingTheCapacityReleasesAndLoweringBelowABatchRefusesIt() throws {
        let (queue, _) = try self.fullQueue(capacity: 2, policy: .block, holding: 2)
        let one = qtNamed("one")
        let single = try BTThread { try! queue.addOperation(one) }
        btWaitForBlockedProducers(queue, 1)
        try queue.setCapacity(3)
        #expect(single.join())
        #expect(queue.operationCount == 3)
        let pair = [qtNamed("x"), qtNamed("y")]
        let batch = try BTThread {
            qtExpectError(.batchExceedsCapacity(name: "bt-full", count: 2, capacity: 1)) {
                try queue.addOperations(pair)
            }
        }
        btWaitForBlockedProducers(queue, 1)
        try queue.setCapacity(1)
        #expect(batch.join())
        #expect(pair.allSatisfy { !$0.isFinished && !$0.isExecuting })
        queue.isSuspended = false
        qtDrain(queue)
    }

    @Test func barriersDoNotCountAndAreNeverHeldBack() throws {
        let (queue, _) = try self.fullQueue(capacity: 1, policy: .reject, holding: 1)
        let ran = QTFlag()
        queue.addBarrierBlock { ran.set() }  // must not throw, block or count
        #expect(queue.snapshot().operationCount == 1)
        queue.isSuspended = false
        qtDrain(queue)
        #expect(ran.isSet)
    }

    // MARK: - Contention

    /// Four producers add 150 operations each to a width-2 queue of capacity 4 whose operations are slower than
    /// the producers; every operation runs exactly once, whatever the policy, and the capacity is never exceeded.
    @Test(arguments: [SpindleFullQueuePolicy.block, .reject, .callerRuns])
    func producersFasterThanTheQueue(policy: SpindleFullQueuePolicy) throws {
        let queue = try SpindleOperationQueue(name: "bt-contention", maxConcurrentOperationCount: 2, capacity: 4,
                                              whenFull: policy)
        let perProducer = 150, producers = 4
        let sink = QTSink()
        let ops = (0..<(perProducer * producers)).map { i in
            BTCountingOp(name: "c\(i)") {
                var x = UInt64(i)
                for k in 0..<2000 { x = x &* 31 &+ UInt64(k) }
                sink.store(x)
            }
        }
        let retries = QTCounter()
        try runJoinableThreads(producers, name: "bt-producer") { p in
            for i in 0..<perProducer {
                let op = ops[p * perProducer + i]
                while true {
                    do {
                        try queue.addOperation(op)
                        break
                    } catch SpindleError.queueFull(_, _) {
                        retries.increment()  // .reject: try again (the operation was left idle)
                    } catch {
                        Issue.record("unexpected \(error)")
                        return
                    }
                }
            }
        }
        qtDrain(queue)
        #expect(ops.allSatisfy { $0.runs.count == 1 && $0.isFinished })
        let snapshot = queue.snapshot()
        #expect(snapshot.highWaterOperationCount <= 4)
        #expect(snapshot.highWaterExecuting <= 2)
        #expect(snapshot.finished + snapshot.ranOnCaller == ops.count)
        #expect(snapshot.rejected == retries.count)
        #expect(snapshot.blockedProducers == 0 && snapshot.operationCount == 0)
        if policy != .callerRuns { #expect(snapshot.ranOnCaller == 0) }
    }

    // MARK: - Async producers

    @Test func asyncProducersSuspendWithoutBlockingThreads() async throws {
        let (queue, _) = try self.fullQueue(capacity: 1, policy: .reject, holding: 1)
        // More producers than the cooperative pool has threads: if they blocked threads, they could not all
        // be waiting, and the probe task below could not run.
        let count = 4 * spindleActiveProcessorCount() + 4
        let ops = (0..<count).map { BTCountingOp(name: "a\($0)") }
        let producers = ops.map { op in Task { try await queue.addOperationWhenRoom(op) } }
        await btAwaitBlockedProducers(queue, count)
        let probe = await Task { 42 }.value
        #expect(probe == 42)
        queue.isSuspended = false
        for producer in producers { try await producer.value }
        try await queue.waitUntilAllOperationsAreFinished()
        #expect(ops.allSatisfy { $0.runs.count == 1 })
    }

    @Test func cancellingAnAsyncProducerAddsNothing() async throws {
        let (queue, _) = try self.fullQueue(capacity: 1, policy: .block, holding: 1)
        let op = BTCountingOp(name: "cancelled-producer")
        let producer = Task { try await queue.addOperationWhenRoom(op) }
        await btAwaitBlockedProducers(queue, 1)
        producer.cancel()
        await #expect(throws: CancellationError.self) { try await producer.value }
        let snapshot = queue.snapshot()
        #expect(snapshot.blockedProducers == 0 && snapshot.operationCount == 1 && snapshot.rejected == 1)
        queue.isSuspended = false
        try await queue.waitUntilAllOperationsAreFinished()
        #expect(op.runs.count == 0 && !op.isFinished)
    }
}
