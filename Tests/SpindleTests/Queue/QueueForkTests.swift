import Synchronization
import Testing

@_spi(Faults) @testable import Spindle

/// A queue made before `fork()`, used in the child (issue 23), through `SpindleFaults.simulateForkedChild`: the
/// queue is told it came from a parent process, so every refusal path runs here without forking this process
/// (which other suites' threads make unsafe). The real fork is exercised by `spindle-stress --forks`.
@Suite struct QueueForkTests {
    /// Whether `body` threw `forkedChild` naming the queue "parent".
    private func refused(_ body: () throws -> Void) -> Bool {
        do { try body() } catch let error as SpindleError {
            if case .forkedChild(name: "parent") = error { return true }
        } catch {}
        return false
    }

    private func refusedAsync(_ body: () async throws -> Void) async -> Bool {
        do { try await body() } catch let error as SpindleError {
            if case .forkedChild(name: "parent") = error { return true }
        } catch {}
        return false
    }

    @Test func aQueueFromTheParentRefusesWorkAndWaitsWithATypedErrorAndTouchesNothing() async throws {
        let queue = try SpindleOperationQueue(name: "parent", maxConcurrentOperationCount: 2)
        let warm = try SpindleSemaphore(value: 0)
        queue.addOperation { warm.signal() }
        #expect(warm.wait(until: .after(.seconds(10))))
        SpindleFaults.simulateForkedChild(queue, true)
        defer { SpindleFaults.simulateForkedChild(queue, false) }

        let op = SpindleBlockOperation { Issue.record("an operation added in the child ran") }
        #expect(self.refused { try queue.addOperation(op) })
        #expect(self.refused { try queue.addOperations([op]) })
        #expect(self.refused { try queue.addOperation(op, timeout: .seconds(1)) })
        #expect(self.refused { try queue.waitUntilAllOperationsAreFinished() })
        #expect(self.refused { try queue.setMaxConcurrentOperationCount(1) })
        #expect(self.refused { try queue.setCapacity(4) })
        #expect(await self.refusedAsync { try await queue.addOperationWhenRoom(op) })
        #expect(await self.refusedAsync { try await queue.waitUntilAllOperationsAreFinished() })
        // The operation is untouched: another queue takes it.
        #expect(!op.isFinished && !op.isCancelled)

        let refusedBlock = queue.addOperation { Issue.record("a block added in the child ran") }
        #expect(refusedBlock.isFinished && refusedBlock.isCancelled)
        let refusedBarrier = queue.addBarrierBlock { Issue.record("a barrier added in the child ran") }
        #expect(refusedBarrier.isFinished && refusedBarrier.isCancelled)
        queue.isSuspended = true
        queue.cancelAllOperations()
        #expect(queue.operations.isEmpty && queue.operationCount == 0)
        #expect(queue.name == "parent" && queue.maxConcurrentOperationCount == 2 && !queue.isSuspended)

        // Back in its own process, nothing changed: not suspended, width 2, and it runs work.
        SpindleFaults.simulateForkedChild(queue, false)
        #expect(queue.maxConcurrentOperationCount == 2 && !queue.isSuspended && queue.capacity == nil)
        let other = SpindleOperationQueue(name: "other")
        let ran = try SpindleSemaphore(value: 0)
        let late = SpindleBlockOperation {}
        late.completionBlock = { ran.signal() }
        try other.addOperation(late)
        #expect(ran.wait(until: .after(.seconds(10))))
        queue.addOperation { ran.signal() }
        #expect(ran.wait(until: .after(.seconds(10))))
        #expect(try queue.waitUntilAllOperationsAreFinished(until: .after(.seconds(10))))
    }

    @Test func perProcessObjectsAreMadeOncePerProcess() {
        let made = Atomic<Int>(0)
        final class Thing: Sendable {}
        let slot = PerProcess { () -> Thing in
            made.add(1, ordering: .relaxed)
            return Thing()
        }
        let first = slot.current
        #expect(slot.current === first && slot.current === first)
        #expect(made.load(ordering: .relaxed) == 1)
        #expect(DeadlineTimer.shared === DeadlineTimer.shared && BlockHelperPool.shared === BlockHelperPool.shared)
    }

    @Test func asyncWorkOnAQueueFromTheParentIsRefusedOrRunsOnTheCaller() async throws {
        let queue = SpindleOperationQueue(name: "parent")
        SpindleFaults.simulateForkedChild(queue, true)
        defer { SpindleFaults.simulateForkedChild(queue, false) }
        #expect(await self.refusedAsync { _ = try await queue.run { Issue.record("run's body ran in the child") } })
        // A task preferring the queue's executor still runs: its jobs run on the thread that enqueues them.
        let answer = await withTaskExecutorPreference(queue.taskExecutor) { () async -> Int in
            await Task.yield()
            return 42
        }
        #expect(answer == 42)
    }

    @Test func runOnAFullQueueThatRefusesThrowsQueueFullInsteadOfTrapping() async throws {
        let queue = SpindleOperationQueue(name: "full")
        try queue.setCapacity(1, whenFull: .reject)
        queue.isSuspended = true
        try queue.addOperation(SpindleBlockOperation {})
        do {
            _ = try await queue.run { Issue.record("run's body ran although the queue was full") }
            Issue.record("run did not throw")
        } catch let error as SpindleError {
            guard case .queueFull(name: "full", capacity: 1) = error else {
                Issue.record("unexpected \(error)")
                return
            }
        }
        queue.isSuspended = false
        #expect(try queue.waitUntilAllOperationsAreFinished(until: .after(.seconds(10))))
    }
}
