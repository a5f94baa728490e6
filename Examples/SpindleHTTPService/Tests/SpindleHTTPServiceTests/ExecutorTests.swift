import Glibc
import Spindle
import SpindleHTTPServiceKit
import Testing

/// `SpindleWorkExecutor` on its own, with work that blocks on a semaphore and so does not check its cancellation:
/// the answer must not wait for the work.
extension EndToEndTests {
    @Suite struct ExecutorTests {
        /// A deadline passing while the work is blocked answers `.deadlineExpired` at once; the operation is
        /// cancelled, keeps its slot until the work returns, then leaves the queue.
        @Test(.timeLimit(.minutes(1)))
        func deadlineAnswersWithoutWaitingForTheWork() async throws {
            let executor = try SpindleWorkExecutor(name: "deadline-test", width: 1, capacity: 2)
            let release = try SpindleSemaphore(value: 0)
            let outcome = try await withWatchdog(.seconds(30), "the deadline's answer") {
                await executor.execute(timeout: .milliseconds(100)) { cancellation -> Bool in
                    release.wait()  // ignores its cancellation until released
                    return cancellation.isCancelled
                }
            }
            guard case .deadlineExpired = outcome else {
                Issue.record("expected deadlineExpired, got \(outcome)")
                return
            }
            #expect(executor.queue.snapshot().executing == 1, "the blocked work should still hold its slot")
            _ = release.signal()
            try await withWatchdog(.seconds(30), "the queue to drain") {
                try await executor.queue.waitUntilAllOperationsAreFinished()
            }
            let snapshot = executor.queue.snapshot()
            #expect(snapshot.finished == 1 && snapshot.cancelled == 1, "\(snapshot)")
            executor.queue.shutdown()
        }

        /// Cancelling the awaiting task answers `.abandoned` and cancels the operation, which the work sees.
        @Test(.timeLimit(.minutes(1)))
        func cancelledTaskAbandonsAndCancelsTheWork() async throws {
            let executor = try SpindleWorkExecutor(name: "abandon-test", width: 1, capacity: 2)
            let started = try SpindleSemaphore(value: 0)
            let sawCancellation = try SpindleSemaphore(value: 0)
            let request = Task {
                await executor.execute(timeout: .seconds(60)) { cancellation -> Int in
                    _ = started.signal()
                    while !cancellation.isCancelled { sched_yield() }
                    _ = sawCancellation.signal()
                    throw WorkCancelled()
                }
            }
            try await withWatchdog(.seconds(30), "the work to start") { try await started.wait() }
            request.cancel()
            let outcome = try await withWatchdog(.seconds(30), "the abandoned answer") { await request.value }
            guard case .abandoned = outcome else {
                Issue.record("expected abandoned, got \(outcome)")
                return
            }
            try await withWatchdog(.seconds(30), "the work to see its cancellation") {
                try await sawCancellation.wait()
            }
            try await withWatchdog(.seconds(30), "the queue to drain") {
                try await executor.queue.waitUntilAllOperationsAreFinished()
            }
            #expect(executor.queue.snapshot().cancelled == 1)
            executor.queue.shutdown()
        }

        /// A full queue refuses at once; a queue shut down refuses too; neither runs the work.
        @Test(.timeLimit(.minutes(1)))
        func fullAndShutDownQueuesRefuse() async throws {
            let executor = try SpindleWorkExecutor(name: "refuse-test", width: 1, capacity: 1)
            let release = try SpindleSemaphore(value: 0)
            let started = try SpindleSemaphore(value: 0)
            let holder = Task {
                await executor.execute(timeout: .seconds(60)) { _ -> Int in
                    _ = started.signal()
                    release.wait()
                    return 1
                }
            }
            try await withWatchdog(.seconds(30), "the holder to start") { try await started.wait() }
            let full = await executor.execute(timeout: .seconds(60)) { _ -> Int in 2 }
            guard case .refused(.full) = full else {
                Issue.record("expected refused(.full), got \(full)")
                return
            }
            executor.queue.shutdown(.drain)
            _ = release.signal()
            let held = try await withWatchdog(.seconds(30), "the holder's answer") { await holder.value }
            guard case .completed(1) = held else {
                Issue.record("the accepted work should still complete after shutdown(.drain), got \(held)")
                return
            }
            let late = await executor.execute(timeout: .seconds(60)) { _ -> Int in 3 }
            guard case .refused(.shutDown) = late else {
                Issue.record("expected refused(.shutDown), got \(late)")
                return
            }
            let terminated = try await executor.queue.awaitTermination(timeout: .seconds(30))
            #expect(terminated)
        }
    }
}
