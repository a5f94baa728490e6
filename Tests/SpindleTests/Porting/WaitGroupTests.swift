import Testing
@testable import Spindle

/// Issue 22: `SpindleWaitGroup`, the `DispatchGroup` mapping.
@Suite struct WaitGroupTests {
    @Test func anEmptyGroupDoesNotWait() {
        let group = SpindleWaitGroup(name: "empty")
        group.wait()
        #expect(group.wait(timeout: .zero))
        #expect(group.pendingCount == 0)
    }

    @Test func waitReturnsOnceEveryEntryHasLeftFromOtherThreads() throws {
        let group = SpindleWaitGroup(name: "threads")
        let go = opSemaphore()
        let left = OpCounter()
        let hasLeft = opSemaphore()
        for _ in 0..<4 { group.enter() }
        let threads = try (0..<4).map { i in
            try OpThread.run("wg-\(i)") {
                _ = go.wait(timeout: opDeadline)
                left.increment()
                try? group.leave()
                hasLeft.signal()
            }
        }
        #expect(!group.wait(timeout: .milliseconds(5)), "returned while four entries were in flight")
        // Three of the four leave; the wait must still not return while the last one is in flight.
        for _ in 0..<3 { go.signal() }
        for _ in 0..<3 { #expect(hasLeft.wait(timeout: opDeadline)) }
        #expect(group.pendingCount == 1)
        #expect(!group.wait(timeout: .milliseconds(5)), "returned while one entry was still in flight")
        go.signal()
        #expect(group.wait(timeout: opDeadline))
        #expect(left.value == 4)
        #expect(group.pendingCount == 0)
        for thread in threads { #expect(thread.finish()) }
    }

    @Test func anUnbalancedLeaveThrowsAndChangesNothing() throws {
        let group = SpindleWaitGroup(name: "unbalanced")
        #expect(opErrorCase { try group.leave() } == "waitGroupUnbalanced")
        group.enter()
        try group.leave()
        #expect(opErrorCase { try group.leave() } == "waitGroupUnbalanced")
        #expect(group.pendingCount == 0)
        group.enter()  // still usable
        #expect(group.pendingCount == 1)
        try group.leave()
    }

    @Test func notifyRunsAfterTheLastLeaveInTheOrderRegisteredOrAtOnceWhenIdle() throws {
        let queue = try SpindleOperationQueue(name: "wg-notify", maxConcurrentOperationCount: 1)
        let group = SpindleWaitGroup(name: "notify")
        let log = OpLog<String>()
        let idle = group.notify(on: queue) { log.add("idle") }
        #expect(try idle.waitUntilFinished(timeout: opDeadline))
        group.enter()
        group.enter()
        let first = group.notify(on: queue) { log.add("first") }
        let second = group.notify(on: queue) { log.add("second") }
        try group.leave()
        #expect(!first.isFinished && first.owningQueue == nil, "added before the last leave")
        try group.leave()
        #expect(try second.waitUntilFinished(timeout: opDeadline))
        #expect(first.isFinished)
        #expect(log.all == ["idle", "first", "second"])
    }

    @Test func addOperationEntersAndLeavesWhenTheOperationFinishesEvenIfRefused() throws {
        let queue = try SpindleOperationQueue(name: "wg-add", maxConcurrentOperationCount: 2)
        let group = SpindleWaitGroup(name: "add")
        let ran = OpCounter()
        let release = opSemaphore()
        let held = group.addOperation(to: queue) { _ = release.wait(timeout: opDeadline); ran.increment() }
        for _ in 0..<10 { group.addOperation(to: queue) { ran.increment() } }
        #expect(group.pendingCount >= 1)
        #expect(!group.wait(timeout: .milliseconds(5)), "returned while an operation was held")
        release.signal()
        #expect(group.wait(timeout: opDeadline))
        #expect(ran.value == 11 && held.isFinished)

        queue.shutdown()
        let refused = group.addOperation(to: queue) { ran.increment() }
        #expect(group.wait(timeout: opDeadline), "a refused operation must still leave")
        #expect(refused.isFinished && refused.isCancelled && ran.value == 11)
    }
}
