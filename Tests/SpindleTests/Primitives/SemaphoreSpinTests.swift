@testable import Spindle
import Testing

/// `SpindleSemaphore`'s parked storage when waiters leave the line (the removal path of issue 23), and what its
/// waits report to the semaphore's `SpinPolicy`. The policy's own decisions are in SpinPolicyTests.
@Suite("SpindleSemaphore storage and spin policy", .timeLimit(.minutes(2)))
struct SemaphoreSpinTests {
    /// (`parked.count`, `parkedHead`), read under the semaphore's lock.
    private func storage(_ semaphore: SpindleSemaphore) -> (count: Int, head: Int) {
        semaphore.condition.withLock { (semaphore.parked.count, semaphore.parkedHead) }
    }

    private func policy(_ semaphore: SpindleSemaphore) -> SpinPolicy {
        semaphore.condition.withLock { semaphore.spinPolicy }
    }

    /// Yields until `condition` holds (10 s at most): for a task to reach its suspension point.
    private func eventually(_ condition: () -> Bool) async -> Bool {
        let end = monotonicNanoseconds() + 10_000_000_000
        while !condition() {
            if monotonicNanoseconds() >= end { return condition() }
            await Task.yield()
        }
        return true
    }

    @Test("waiters leaving the line (cancelled) drop the served prefix too: storage stays bounded")
    func storageBoundedWhenWaitersLeave() async throws {
        // 200 async waiters in a known order; 70 are granted (the head moves to 70 of 200: no batch is due, since
        // the served prefix is not yet half the array); then 129 of the remaining 130 are cancelled. Each removal
        // must drop the served prefix once it is due, or 70 served nodes stay behind one live waiter.
        let semaphore = try SpindleSemaphore()
        let total = 200, granted = 70
        var tasks: [Task<Bool, Never>] = []
        for index in 0..<total {
            tasks.append(Task {
                do {
                    try await semaphore.wait()
                    return true
                } catch {
                    return false
                }
            })
            try #require(await eventually { semaphore.waiterCount == index + 1 }, "waiter \(index) not in line")
        }
        for index in 0..<granted { #expect(semaphore.signal(), "signal \(index) found nobody in line") }
        let afterGrants = storage(semaphore)
        #expect(afterGrants.head == granted && afterGrants.count == total)
        for task in tasks[granted..<(total - 1)] { task.cancel() }
        for (index, task) in tasks[granted..<(total - 1)].enumerated() {
            #expect(await task.value == false, "waiter \(granted + index) was not cancelled")
        }
        let afterCancels = storage(semaphore)
        #expect(afterCancels.count - afterCancels.head == 1, "one waiter left in line")
        #expect(afterCancels.count <= SpindleSemaphore.compactAfter + 1,
                "parked holds \(afterCancels.count) nodes for 1 live waiter")
        for (index, task) in tasks[..<granted].enumerated() {
            #expect(await task.value, "granted waiter \(index) did not return normally")
        }
        #expect(semaphore.signal(), "the last waiter is still in line")
        #expect(await tasks[total - 1].value)
        #expect(storage(semaphore) == (0, 0))
        #expect(semaphore.value == 0)
    }

    @Test("a new semaphore's policy is COLD; polls and timed-out waits report nothing to it")
    func timeoutsReportNothing() throws {
        let semaphore = try SpindleSemaphore()
        #expect(policy(semaphore) == SpinPolicy())
        #expect(policy(semaphore).budgetNanos == 0)
        #expect(semaphore.wait(timeout: .zero) == false)
        #expect(semaphore.wait(until: .now) == false)
        #expect(semaphore.wait(timeout: .milliseconds(5)) == false)  // COLD: parks at once, then times out
        #expect(policy(semaphore) == SpinPolicy())
        #expect(storage(semaphore) == (0, 0))
    }

    @Test("a free permit is taken without going idle: nothing is reported")
    func freePermitReportsNothing() throws {
        let semaphore = try SpindleSemaphore(value: 2)
        semaphore.wait()
        #expect(semaphore.wait(timeout: .zero))
        #expect(policy(semaphore) == SpinPolicy())
    }

    @Test("a WARM semaphore's wait that finds nothing counts a missed spin; two in a row make it COLD")
    func missedSpinsCool() throws {
        let semaphore = try SpindleSemaphore()
        semaphore.condition.withLock {
            semaphore.spinPolicy.workArrived(afterIdleNanos: 0)
            semaphore.spinPolicy.workArrived(afterIdleNanos: 0)
        }
        let warm = policy(semaphore)
        #expect(warm.budgetNanos == SpinPolicy.window)
        // Nobody signals: the spin uses its whole budget (16 µs, far inside the timeout), then the wait parks
        // and times out. The miss is reported; the timeout is not.
        #expect(semaphore.wait(timeout: .milliseconds(100)) == false)
        #expect(policy(semaphore).misses == 1)
        #expect(policy(semaphore).estimateNanos == warm.estimateNanos)
        #expect(policy(semaphore).budgetNanos == SpinPolicy.window)
        #expect(semaphore.wait(timeout: .milliseconds(100)) == false)
        #expect(policy(semaphore).misses == 2)
        #expect(policy(semaphore).budgetNanos == 0)
        // COLD: the next wait parks at once, so no spin and no further miss.
        #expect(semaphore.wait(timeout: .milliseconds(5)) == false)
        #expect(policy(semaphore).misses == 2)
        #expect(storage(semaphore) == (0, 0))
    }

    @Test("a WARM waiter that spins in vain, parks and is granted reports the miss, then the gap to its grant")
    func spunThenGranted() throws {
        let semaphore = try SpindleSemaphore()
        semaphore.condition.withLock {
            for _ in 0..<10 { semaphore.spinPolicy.workArrived(afterIdleNanos: 0) }
        }
        let warm = policy(semaphore)
        #expect(warm.budgetNanos == SpinPolicy.window)
        let ready = OracleSemaphore()
        let done = OracleSemaphore()
        let waiter = try SpindleThread.spawnJoinable(name: "sem-report") {
            ready.post()
            semaphore.wait()
            done.post()
        }
        #expect(ready.wait())
        try #require(waitUntil(deadline: 10) { storage(semaphore).count - storage(semaphore).head == 1 })
        #expect(semaphore.signal())
        #expect(done.wait())
        try waiter.join()
        // The signal came after the park, so the gap to the grant is longer than the whole spin (the window):
        // the miss stays counted, and the gap, capped, moves the estimate to within these bounds.
        let after = policy(semaphore)
        #expect(after.misses == 1)
        #expect(after.estimateNanos >= (warm.estimateNanos + SpinPolicy.window + 1) / 2)
        #expect(after.estimateNanos <= (warm.estimateNanos + SpinPolicy.gapCap + 1) / 2)
        #expect(semaphore.value == 0)
    }
}
