#if SpindleServiceLifecycle  // the trait of the same name (Package.swift)
import Glibc
import Logging
import ServiceLifecycle
import Spindle
import SpindleServiceLifecycle
import Testing

/// The whole path: a `ServiceGroup` running a queue service and a run-loop-thread service receives a real SIGTERM,
/// shuts them down gracefully in reverse order, and returns. In a process of its own (an exit test), since the signal
/// goes to the whole process. The child exits with a code naming the first check that failed.
@Suite struct ServiceGroupSignalTests {
    /// A service that tells the test it runs (by then the group has installed its signal handlers: it registers
    /// them before starting any service) and returns at graceful shutdown.
    struct Probe: Service {
        let running = try! SpindleSemaphore(value: 0)  // 0 is a valid value

        func run() async throws {
            self.running.signal()
            try await gracefulShutdown()
        }
    }

    @Test func sigtermDrainsTheQueueAndStopsTheLoopThread() async {
        await #expect(processExitsWith: .success) {
            guard let queue = try? SpindleOperationQueue(name: "sig-queue", maxConcurrentOperationCount: 1),
                let loopThread = try? SpindleRunLoopThread(name: "sig-loop")
            else { exit(10) }
            let holder = GatedOperation()
            guard (try? queue.addOperation(holder)) != nil else { exit(11) }
            let queued = (0..<5).map { _ in queue.addOperation {} }
            let probe = Probe()
            let group = ServiceGroup(
                services: [
                    SpindleQueueService(queue: queue), SpindleRunLoopThreadService(loopThread), probe,
                ],
                gracefulShutdownSignals: [.sigterm],
                logger: Logger(label: "sig-test") { _ in SwiftLogNoOpLogHandler() })
            let running = Task { await RunEnd.of { try await group.run() } }

            guard await withinPatience({ (try? await probe.running.wait()) != nil }) == true else { exit(12) }
            guard (try? await holder.started.wait()) != nil, !queue.isShutDown else { exit(13) }
            kill(getpid(), SIGTERM)
            // The holder keeps the other operations queued until the queue is shut down: drained, not cancelled.
            guard await eventually({ queue.isShutDown }) else { exit(14) }
            guard !queued.contains(where: { $0.isFinished || $0.isCancelled }) else { exit(15) }
            holder.gate.signal()
            guard await withinPatience({ await running.value }) == .returned else { exit(16) }
            guard queue.isTerminated, queued.allSatisfy({ $0.isFinished && !$0.isCancelled }) else { exit(17) }
            guard loopThread.thread.isFinished else { exit(18) }
            exit(0)
        }
    }
}
#endif
