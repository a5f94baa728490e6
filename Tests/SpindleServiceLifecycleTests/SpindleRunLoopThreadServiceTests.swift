#if SpindleServiceLifecycle  // the trait of the same name (Package.swift)
import ServiceLifecycle
import ServiceLifecycleTestKit
import Spindle
import SpindleServiceLifecycle
import Testing

/// `SpindleRunLoopThreadService`: the loop keeps serving until graceful shutdown, which stops and joins its thread;
/// cancellation stops the loop for good without waiting.
@Suite struct SpindleRunLoopThreadServiceTests {
    /// Performs a block on `loopThread`'s loop and awaits it (bounded): whether the loop served it.
    func served(by loopThread: SpindleRunLoopThread) async -> Bool {
        let done = try! SpindleSemaphore(value: 0)  // 0 is a valid value
        loopThread.runLoop.perform { done.signal() }
        return await withinPatience { (try? await done.wait()) != nil } == true
    }

    @Test func gracefulShutdownStopsAndJoinsTheThread() async throws {
        let loopThread = try SpindleRunLoopThread(name: "svc-loop")
        let service = SpindleRunLoopThreadService(loopThread)
        let end = await withinPatience {
            await testGracefulShutdown { trigger in
                await withTaskGroup(of: RunEnd.self) { group in
                    group.addTask { await RunEnd.of { try await service.run() } }
                    #expect(await self.served(by: loopThread), "the loop did not serve while the service ran")
                    #expect(!loopThread.thread.isFinished)
                    trigger.triggerGracefulShutdown()
                    return await group.next()!
                }
            }
        }
        #expect(end == .returned)
        #expect(loopThread.thread.isFinished, "the service returned before the thread exited")
        #expect(try loopThread.shutdown(until: .now))  // already joined: returns at once
    }

    @Test func cancellationStopsTheLoopForGoodAndThrows() async throws {
        let loopThread = try SpindleRunLoopThread(name: "svc-loop-cancel")
        let service = SpindleRunLoopThreadService(loopThread)
        let running = Task { await RunEnd.of { try await service.run() } }
        #expect(await self.served(by: loopThread))
        running.cancel()
        let end = await withinPatience { await running.value }
        #expect(end == .cancelled)
        // Nobody else asked it to stop: the thread exits only because the service did.
        #expect(await eventually { loopThread.thread.isFinished }, "the loop was not stopped")
        #expect(try loopThread.shutdown(until: .after(patience)))  // reaps it
    }

    @Test func describesItselfByTheThreadsName() throws {
        let loopThread = try SpindleRunLoopThread(name: "svc-loop-name")
        #expect("\(SpindleRunLoopThreadService(loopThread))" == "SpindleRunLoopThreadService('svc-loop-name')")
        try loopThread.shutdown()
    }
}
#endif
