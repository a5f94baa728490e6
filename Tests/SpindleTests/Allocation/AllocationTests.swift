import CMallocCounter
import Synchronization
import Testing

@testable import Spindle

/// Allocation budgets (issue 3: one allocation per plain operation's whole life; issue 4: none per enqueue in
/// steady state). Counted with the test-only malloc counter; skipped under sanitizers, which own malloc.
@Suite(.serialized) struct AllocationTests {
    final class Empty: SpindleOperation, @unchecked Sendable {
        override func main() throws {}
    }

    @Test(.enabled(if: cm_available() == 1)) func plainOperationLifeIsOneAllocation() throws {
        // Warm up this thread's lazily created context (thread object, thread-local boxes).
        try Empty().start()
        var counts: [Int] = []
        counts.reserveCapacity(100)
        var allFinished = true
        for _ in 0..<100 {
            cm_thread_begin()
            do {
                let op = Empty()
                try op.start()
                allFinished = allFinished && op.isFinished
            }
            counts.append(cm_thread_end())
        }
        #expect(allFinished)
        // Every iteration: the object itself and nothing else.
        #expect(counts.allSatisfy { $0 == 1 }, "allocations per create+start+finish: \(Set(counts))")
    }

    @Test(.enabled(if: cm_available() == 1)) func operationsLeaveRoomForAnAllocatorHeaderInTheFastBins() {
        // glibc's fast bins take chunks up to 128 bytes (a request of at most 120). An allocator in front that adds
        // a 16-byte header (package-benchmark's malloc interposer) must still land there: at most 104 bytes.
        func usable(_ op: SpindleOperation) -> Int {
            cm_usable_size(Unmanaged.passUnretained(op).toOpaque())
        }
        let plain = Empty()
        let oneBlock = SpindleBlockOperation {}
        #expect(usable(plain) <= 88, "a plain operation: \(usable(plain)) bytes usable")
        #expect(usable(oneBlock) <= 104, "a one-block operation: \(usable(oneBlock)) bytes usable")
        withExtendedLifetime((plain, oneBlock)) {}
    }

    @Test(.enabled(if: cm_available() == 1)) func aCompletionBlockLivesInTheSideObject() throws {
        let ran = Atomic<Int>(0)
        let block: @Sendable () -> Void = { ran.add(1, ordering: .relaxed) }
        // Warm up: the first side object in the process initialises its type's metadata once.
        let first = Empty()
        first.completionBlock = block
        try first.start()
        var counts: [Int] = []
        counts.reserveCapacity(100)
        for _ in 0..<100 {
            let op = Empty()
            cm_thread_begin()
            op.completionBlock = block
            counts.append(cm_thread_end())
            try op.start()
        }
        #expect(ran.load(ordering: .relaxed) == 101)
        // Setting it creates the side object: one allocation (two in a debug build, where an accessor's coroutine
        // frame is allocated too), so that operations without one stay at 88 bytes.
        #expect(counts.allSatisfy { $0 == 1 || $0 == 2 }, "allocations to set a completion block: \(Set(counts))")
    }

    @Test(.enabled(if: cm_available() == 1)) func aDependencyAddsOneSideObjectPerOperation() throws {
        func pair() throws {
            let a = Empty()
            let b = Empty()
            try b.addDependency(a)
            try a.start()
            try b.start()
        }
        // Warm up: the first dependency in the process initialises shared state once (run alone, this test would
        // otherwise count it in its first iteration).
        try pair()
        var counts: [Int] = []
        counts.reserveCapacity(100)
        for _ in 0..<100 {
            cm_thread_begin()
            try pair()
            counts.append(cm_thread_end())
        }
        // The two operations, `a`'s side object (its dependent, inline) and `b`'s (its dependency, inline): no
        // lists, no weak-reference side tables.
        #expect(counts.allSatisfy { $0 == 4 }, "allocations per dependency pair: \(Set(counts))")
    }

    /// Issue 22: with a queue's hooks set (`SpindleOperationQueueHooks`), an operation's add, start and finish
    /// allocate nothing for them (no box, closure or list per operation): as few allocations as without hooks.
    /// Here, not in the hooks' suite, so that its global count never overlaps the other one's; the adds come from a
    /// thread of its own, so no tagged test-runner thread is left behind to be counted by later windows.
    @Test(.enabled(if: cm_available() == 1)) func enqueueWithHooksAllocatesNothingPerOperation() throws {
        let queue = try SpindleOperationQueue(name: "hooks-allocations", maxConcurrentOperationCount: 2)
        let counted = OpCounter()
        queue.hooks = SpindleOperationQueueHooks(
            willAdd: { _, _ in counted.increment() }, didAdd: { _, _ in counted.increment() },
            willStart: { _, _ in counted.increment() }, didFinish: { _, _, _ in counted.increment() })
        let n = 20_000
        let result = OpBox<(total: Int, drained: Bool, told: Int)?>(nil)
        let adder = try SpindleThread.spawnJoinable(name: "alloc-adder") {
            do {
                // Tag this thread and both workers (a rendezvous puts the two operations on two workers).
                cm_tag_thread()
                let arrived = opSemaphore()
                let release = opSemaphore()
                for _ in 0..<2 {
                    queue.addOperation {
                        cm_tag_thread()
                        arrived.signal()
                        _ = release.wait(timeout: opDeadline)
                    }
                }
                guard arrived.wait(timeout: opDeadline) && arrived.wait(timeout: opDeadline) else { return }
                release.signal()
                release.signal()
                for _ in 0..<100 { try queue.addOperation(Empty()) }
                _ = try queue.waitUntilAllOperationsAreFinished(timeout: opDeadline)
                let ops = (0..<n).map { _ in Empty() }
                let before = counted.value
                cm_global_begin()
                // Through a buffer pointer: a debug build's Array iterator allocates a coroutine frame per element.
                try ops.withUnsafeBufferPointer { buffer in
                    for i in 0..<buffer.count { try queue.addOperation(buffer[i]) }
                }
                let drained = try queue.waitUntilAllOperationsAreFinished(timeout: .seconds(60))
                let total = cm_global_end()
                result.value = (total, drained, counted.value - before)
            } catch {
                Issue.record("\(error)")
            }
        }
        try adder.join()
        let measured = try #require(result.value)
        #expect(measured.drained)
        #expect(measured.told == 4 * n, "every hook told of every operation")
        #expect(measured.total < n / 100, "allocations for \(n) enqueue+run+finish with hooks: \(measured.total)")
    }

    @Test(.enabled(if: cm_available() == 1)) func enqueueAllocatesNothingInSteadyState() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        // Tag this thread and both workers (a rendezvous makes the two operations run on two different workers),
        // so allocations by other tests running in parallel are not counted. This also warms the workers up.
        cm_tag_thread()
        let arrived = try SpindleSemaphore(value: 0)
        let release = try SpindleSemaphore(value: 0)
        for _ in 0..<2 {
            queue.addOperation {
                cm_tag_thread()
                arrived.signal()
                _ = release.wait(timeout: .seconds(30))
            }
        }
        #expect(arrived.wait(timeout: .seconds(30)) && arrived.wait(timeout: .seconds(30)))
        release.signal()
        release.signal()
        for _ in 0..<100 { try queue.addOperation(Empty()) }
        #expect(try queue.waitUntilAllOperationsAreFinished(timeout: .seconds(30)))
        let n = 20_000
        let ops = (0..<n).map { _ in Empty() }
        cm_global_begin()
        // Through a buffer pointer: a debug build's Array iterator allocates a coroutine frame per element.
        try ops.withUnsafeBufferPointer { buffer in
            for i in 0..<buffer.count { try queue.addOperation(buffer[i]) }
        }
        let drained = try queue.waitUntilAllOperationsAreFinished(timeout: .seconds(60))
        let total = cm_global_end()
        #expect(drained)
        // No per-enqueue node or closure: far fewer allocations than operations (a few from thread wakeups or
        // the test harness may land in the window).
        #expect(total < n / 100, "allocations for \(n) enqueue+run+finish: \(total)")
    }
}
