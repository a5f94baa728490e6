import Testing

@testable import Spindle

/// `SpindleSemaphore.wait() async`: one FIFO with the blocking waiters, cancellation before, during and after,
/// and the "granted and cancelled at once" decision (the waiter granted first keeps its permit).
@Suite struct AsyncSemaphoreTests {
    @Test func aFreePermitIsTakenAtOnce() async throws {
        let sem = try SpindleSemaphore(value: 2)
        try await sem.wait()
        #expect(sem.value == 1)
        try await sem.wait()
        #expect(sem.value == 0)
        #expect(sem.waiterCount == 0)
    }

    @Test func aTaskCancelledBeforeWaitingTakesNothing() async throws {
        let sem = try SpindleSemaphore(value: 1)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await ATOutcome { try await sem.wait(); return 0 }
        }
        #expect(await task.value == .cancelled)
        #expect(sem.value == 1, "a free permit is not taken by a cancelled task")
        #expect(sem.waiterCount == 0)
    }

    @Test func cancellingASuspendedWaiterThrowsAndLeavesNoNode() async throws {
        let sem = try SpindleSemaphore(value: 0)
        let task = Task { await ATOutcome { try await sem.wait(); return 0 } }
        #expect(await atEventually { sem.waiterCount == 1 })
        task.cancel()
        #expect(await task.value == .cancelled)
        #expect(sem.waiterCount == 0, "the cancelled waiter removed its node")
        #expect(sem.signal() == false, "nobody is left to wake")
        #expect(sem.value == 1, "the signal became a free permit: nothing was consumed by the cancelled waiter")
    }

    @Test func cancellingAfterTheWaitReturnedChangesNothing() async throws {
        let sem = try SpindleSemaphore(value: 0)
        let task = Task { await ATOutcome { try await sem.wait(); return 1 } }
        #expect(await atEventually { sem.waiterCount == 1 })
        #expect(sem.signal())
        #expect(await task.value == .value(1))
        task.cancel()
        #expect(sem.value == 0)
        #expect(sem.waiterCount == 0)
    }

    @Test func aWaiterGrantedBeforeItsCancellationKeepsThePermit() async throws {
        // The decision: grant and cancellation are ordered under the semaphore's lock; here the grant is
        // complete before cancel() is even called, so the wait returns normally and the permit is the caller's.
        let sem = try SpindleSemaphore(value: 0)
        let sawCancelled = QTFlag()
        let task = Task {
            await ATOutcome {
                try await sem.wait()
                if Task.isCancelled { sawCancelled.set() }
                return 7
            }
        }
        #expect(await atEventually { sem.waiterCount == 1 })
        #expect(sem.signal())
        task.cancel()
        #expect(await task.value == .value(7))
        #expect(sawCancelled.isSet, "the task learns of its cancellation after the wait")
        #expect(sem.value == 0, "the permit went to the granted waiter, exactly once")
    }

    @Test func aWaiterCancelledBeforeTheSignalPassesItToTheNextInLine() async throws {
        let sem = try SpindleSemaphore(value: 0)
        let first = Task { await ATOutcome { try await sem.wait(); return 1 } }
        #expect(await atEventually { sem.waiterCount == 1 })
        let second = Task { await ATOutcome { try await sem.wait(); return 2 } }
        #expect(await atEventually { sem.waiterCount == 2 })
        first.cancel()
        #expect(await first.value == .cancelled)
        #expect(sem.signal(), "the signal wakes the second waiter")
        #expect(await second.value == .value(2))
        #expect(sem.value == 0)
    }

    @Test func asyncAndBlockingWaitersShareOneFirstInFirstOutLine() async throws {
        let sem = try SpindleSemaphore(value: 0)
        let order = QTLog<String>()
        let blockingA = try SpindleThread.spawnJoinable(name: "at-block-a") {
            sem.wait()
            order.append("blocking A")
        }
        #expect(await atEventually { sem.waiterCount == 1 })
        let asyncB = Task {
            try await sem.wait()
            order.append("async B")
        }
        #expect(await atEventually { sem.waiterCount == 2 })
        let blockingC = try SpindleThread.spawnJoinable(name: "at-block-c") {
            sem.wait()
            order.append("blocking C")
        }
        #expect(await atEventually { sem.waiterCount == 3 })
        let asyncD = Task {
            try await sem.wait()
            order.append("async D")
        }
        #expect(await atEventually { sem.waiterCount == 4 })
        // One permit at a time, each consumed before the next: the line must be served in arrival order.
        for expected in 1...4 {
            #expect(sem.signal())
            #expect(await atEventually { order.count == expected })
        }
        try await asyncB.value
        try await asyncD.value
        try blockingA.join()
        try blockingC.join()
        #expect(order.all == ["blocking A", "async B", "blocking C", "async D"])
    }

    @Test func cancellationsRacingSignalsNeverLoseOrInventAPermit() async throws {
        // 200 async waiters, every other one cancelled while 200 signals arrive from two Spindle threads.
        // Each wait that returned took exactly one permit; each that threw took none; so successes plus the free
        // permits left must equal the signals, and every waiter that was not cancelled must have been served.
        let waiters = 200
        let sem = try SpindleSemaphore(value: 0)
        let tasks = (0..<waiters).map { index in
            Task { () -> (Int, Bool) in
                do {
                    try await sem.wait()
                    return (index, true)
                } catch {
                    #expect(atIsCancellation(error))
                    return (index, false)
                }
            }
        }
        #expect(await atEventually { sem.waiterCount == waiters })
        let signallers = try (0..<2).map { _ in
            try SpindleThread.spawnJoinable(name: "at-signal") { for _ in 0..<(waiters / 2) { sem.signal() } }
        }
        for (index, task) in tasks.enumerated() where index % 2 == 0 { task.cancel() }
        var successes = 0
        for (index, task) in tasks.enumerated() {
            let (_, served) = await task.value
            if served { successes += 1 } else { #expect(index % 2 == 0, "only cancelled waiters may throw") }
        }
        for thread in signallers { try thread.join() }
        #expect(sem.waiterCount == 0)
        #expect(successes + sem.value == waiters)
    }
}
