#if SpindleServiceLifecycle  // the trait of the same name (Package.swift)
import ServiceLifecycle
import ServiceLifecycleTestKit
import Spindle
import SpindleServiceLifecycle
import Testing

/// `SpindleQueueService`: graceful shutdown drains the queue (nothing accepted is cancelled), the drain timeout
/// escalates to cancel, task cancellation cancels, a queue shut down elsewhere ends the service. Graceful shutdown
/// comes from ServiceLifecycleTestKit's `testGracefulShutdown`; the whole path through a `ServiceGroup` and a real
/// SIGTERM is in `ServiceGroupSignalTests`.
@Suite struct SpindleQueueServiceTests {
    @Test func gracefulShutdownDrainsTheQueueAndTheServiceReturnsOnceItTerminated() async throws {
        let queue = try SpindleOperationQueue(name: "svc-drain", maxConcurrentOperationCount: 1)
        let holder = GatedOperation()
        try queue.addOperation(holder)
        let queued = (0..<5).map { _ in queue.addOperation {} }
        let service = SpindleQueueService(queue: queue)

        let end = await withinPatience {
            await testGracefulShutdown { trigger in
                await withTaskGroup(of: RunEnd.self) { group in
                    group.addTask { await RunEnd.of { try await service.run() } }
                    _ = try? await holder.started.wait()
                    #expect(!queue.isShutDown, "shut down before the graceful shutdown")
                    trigger.triggerGracefulShutdown()
                    // The holder keeps the others queued until the queue is shut down, so a service that cancelled
                    // instead of draining would be seen.
                    #expect(await eventually { queue.isShutDown }, "graceful shutdown did not shut the queue down")
                    #expect(!queued.contains { $0.isCancelled || $0.isFinished })
                    holder.gate.signal()
                    return await group.next()!
                }
            }
        }
        #expect(end == .returned)
        #expect(queue.isTerminated)
        #expect(!holder.isCancelled)
        #expect(queued.allSatisfy { $0.isFinished && !$0.isCancelled }, "accepted work was not run")
        let refusal = #expect(throws: SpindleError.self) { try queue.addOperation(SpindleBlockOperation {}) }
        guard case .queueShutDown(name: "svc-drain") = refusal else {
            Issue.record("an add after the shutdown was not refused with queueShutDown: \(String(describing: refusal))")
            return
        }
    }

    @Test func theDrainTimeoutEscalatesToCancel() async throws {
        let queue = try SpindleOperationQueue(name: "svc-escalate", maxConcurrentOperationCount: 1)
        let holder = GatedOperation()  // never released by the test: only a cancel ends it
        try queue.addOperation(holder)
        let queued = (0..<3).map { _ in queue.addOperation {} }
        let service = SpindleQueueService(queue: queue, drainTimeout: .milliseconds(20))

        let end = await withinPatience {
            await testGracefulShutdown { trigger in
                await withTaskGroup(of: RunEnd.self) { group in
                    group.addTask { await RunEnd.of { try await service.run() } }
                    _ = try? await holder.started.wait()
                    trigger.triggerGracefulShutdown()
                    return await group.next()!
                }
            }
        }
        #expect(end == .returned)
        #expect(queue.isTerminated)
        #expect(holder.isCancelled, "the running operation was not told to stop")
        // Behind the holder at width 1, none could start during the drain: all finish cancelled (none starts
        // uncancelled after shutdown(.cancel), even when the holder returns at once on its cancel).
        #expect(queued.allSatisfy { $0.isFinished && $0.isCancelled }, "accepted work was lost or ran")
    }

    @Test func cancellingTheServicesTaskCancelsTheQueue() async throws {
        let queue = try SpindleOperationQueue(name: "svc-cancel", maxConcurrentOperationCount: 1)
        let holder = GatedOperation()
        try queue.addOperation(holder)
        let queued = (0..<3).map { _ in queue.addOperation {} }
        let service = SpindleQueueService(queue: queue)
        let running = Task { await RunEnd.of { try await service.run() } }
        _ = await withinPatience { try? await holder.started.wait() }
        #expect(!queue.isShutDown)
        running.cancel()

        let end = await withinPatience { await running.value }
        #expect(end == .cancelled)
        #expect(queue.isShutDown)
        #expect(holder.isCancelled)
        let terminated = await withinPatience { (try? await queue.awaitTermination()) != nil }
        #expect(terminated == true)
        #expect(queued.allSatisfy { $0.isFinished && $0.isCancelled }, "accepted work was lost or ran")
    }

    @Test func aQueueShutDownElsewhereEndsTheService() async throws {
        let queue = SpindleOperationQueue(name: "svc-elsewhere")
        let ran = queue.addOperation {}
        let service = SpindleQueueService(queue: queue, drainTimeout: .seconds(3600))
        let end = await withinPatience {
            await testGracefulShutdown { _ in  // never triggered
                await withTaskGroup(of: RunEnd.self) { group in
                    group.addTask { await RunEnd.of { try await service.run() } }
                    queue.shutdown(.drain)
                    return await group.next()!
                }
            }
        }
        #expect(end == .returned)
        #expect(queue.isTerminated)
        #expect(ran.isFinished && !ran.isCancelled)
    }

    @Test func describesItselfByTheQueuesName() throws {
        let queue = SpindleOperationQueue(name: "svc-name")
        #expect("\(SpindleQueueService(queue: queue))" == "SpindleQueueService('svc-name')")
        #expect(
            "\(SpindleQueueService(queue: queue, drainTimeout: .seconds(5)))"
                == "SpindleQueueService('svc-name', drain timeout 5.0 seconds)")
        queue.shutdown()
    }
}
#endif
