import Testing

@testable import Spindle

/// Proofs that no async wait blocks a thread of the cooperative pool. Each test parks `atCrowd` awaiting tasks at
/// once — more than the pool has threads, even unrestricted — and only a releaser task that also needs the pool
/// can end their waits, once it sees them all parked. If a wait blocked its thread, the pool would be exhausted,
/// the releaser would never run, and the watchdog (on a Spindle thread) would end the waits by its deadline and
/// make the test fail instead of hanging. CI also runs these with `LIBDISPATCH_COOPERATIVE_POOL_STRICT=1`.
@Suite struct AsyncCooperativePoolTests {
    /// Runs `atCrowd` copies of `wait` and one releaser at the same priority; the releaser calls `release` once
    /// `allParked` holds. Returns whether the watchdog had to rescue the waits, and how many waits completed.
    func crowd(allParked: @escaping @Sendable () -> Bool, release: @escaping @Sendable () -> Void,
               wait: @escaping @Sendable () async throws -> Void) async throws -> (rescued: Bool, completed: Int) {
        let watchdog = try ATWatchdog(seconds: 90, rescue: release)
        let completed = QTCounter()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<atCrowd {
                group.addTask(priority: .medium) {
                    try await wait()
                    completed.increment()
                }
            }
            group.addTask(priority: .medium) {
                while !allParked() && !watchdog.fired { await Task.yield() }
                if !watchdog.fired { release() }
            }
            try await group.waitForAll()
        }
        return (watchdog.disarm(), completed.count)
    }

    @Test func semaphoreWaitsSuspend() async throws {
        let sem = try SpindleSemaphore(value: 0)
        let result = try await self.crowd(
            allParked: { sem.waiterCount == atCrowd },
            release: { for _ in 0..<atCrowd { sem.signal() } },
            wait: { try await sem.wait() })
        #expect(!result.rescued, "a semaphore wait blocked a cooperative thread")
        #expect(result.completed == atCrowd)
    }

    @Test func operationWaitsSuspend() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let gate = QTGate()
        let op = queue.addOperation { gate.wait(seconds: atDeadline) }
        let result = try await self.crowd(
            allParked: { op.waiterCount == atCrowd },
            release: { gate.open() },
            wait: { try await op.waitUntilFinished() })
        #expect(!result.rescued, "an operation wait blocked a cooperative thread")
        #expect(result.completed == atCrowd)
    }

    @Test func queueDrainWaitsSuspend() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let gate = QTGate()
        queue.addOperation { gate.wait(seconds: atDeadline) }
        let result = try await self.crowd(
            allParked: { queue.core.lock.withLock { queue.core.asyncDrainWaiters.list?.count == atCrowd } },
            release: { gate.open() },
            wait: { try await queue.waitUntilAllOperationsAreFinished() })
        #expect(!result.rescued, "a queue drain wait blocked a cooperative thread")
        #expect(result.completed == atCrowd)
    }

    @Test func runAwaitsSuspend() async throws {
        // Every body blocks a queue thread until all of them run at once: only possible if no `run` call holds a
        // cooperative thread while its body runs.
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: atCrowd)
        let gate = QTGate()
        let running = QTCounter()
        let result = try await self.crowd(
            allParked: { running.count == atCrowd },
            release: { gate.open(atCrowd) },
            wait: {
                try await queue.run {
                    running.increment()
                    gate.wait(seconds: atDeadline)
                }
            })
        #expect(!result.rescued, "a run call blocked a cooperative thread")
        #expect(result.completed == atCrowd)
    }

    @Test func asyncOperationsSuspendWithoutHoldingAThread() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: atCrowd)
        let sem = try SpindleSemaphore(value: 0)
        let ops = (0..<atCrowd).map { _ in SpindleAsyncOperation { try await sem.wait() } }
        try queue.addOperations(ops)
        let result = try await self.crowd(
            allParked: { sem.waiterCount == atCrowd },
            release: { for _ in 0..<atCrowd { sem.signal() } },
            wait: {})
        try await queue.waitUntilAllOperationsAreFinished()
        #expect(!result.rescued, "an async operation held a cooperative thread while suspended")
        #expect(ops.allSatisfy { $0.isFinished && $0.error == nil })
    }
}
