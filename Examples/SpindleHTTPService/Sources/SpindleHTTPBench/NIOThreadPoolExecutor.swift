import NIOCore
import NIOPosix
import SpindleHTTPServiceKit
import Synchronization

/// The benchmark's peer executor: NIOThreadPool with the two things the service needs and NIOThreadPool does not
/// have, added the way a service would add them. A capacity: an atomic count of work submitted and not finished;
/// one more is refused. A deadline: a timer on an event loop per request, which answers `.deadlineExpired` and
/// sets a flag the work checks (work not started by then is skipped when the pool reaches it).
final class NIOThreadPoolExecutor: BlockingWorkExecutor {
    let pool: NIOThreadPool
    let width: Int
    let capacity: Int
    private let timers: any EventLoopGroup
    private let inFlight = Atomic<Int>(0)

    /// A started pool of `width` threads holding at most `capacity` pieces of work; deadlines on `timers`.
    init(width: Int, capacity: Int, timers: any EventLoopGroup) {
        self.pool = NIOThreadPool(numberOfThreads: width)
        self.pool.start()
        self.width = width
        self.capacity = capacity
        self.timers = timers
    }

    func execute<Value: Sendable>(
        timeout: Duration,
        _ work: @escaping @Sendable (WorkCancellation) throws -> Value
    ) async -> WorkOutcome<Value> {
        if self.inFlight.add(1, ordering: .relaxed).newValue > self.capacity {
            self.inFlight.subtract(1, ordering: .relaxed)
            return .refused(.full)
        }
        let job = Job<Value>()
        let timer = self.timers.next().scheduleTask(in: .nanoseconds(Self.nanoseconds(timeout))) {
            job.stop(.deadlineExpired)
        }
        self.pool.submit { state in
            defer { timer.cancel() }
            let outcome: WorkOutcome<Value>
            if state == .cancelled {
                outcome = .refused(.shutDown)
            } else if let stopped = job.stopped {
                outcome = stopped  // its deadline passed (or its task was cancelled) before it started
            } else {
                do {
                    outcome = .completed(try work(WorkCancellation { job.stopped != nil }))
                } catch is WorkCancelled {
                    outcome = job.stopped ?? .abandoned
                } catch {
                    outcome = .failed(error)
                }
            }
            // Counted out before the answer, as the Spindle queue does: a client answered never finds its own
            // work still taking room.
            self.inFlight.subtract(1, ordering: .relaxed)
            job.latch.resolve(outcome)
        }
        return await withTaskCancellationHandler {
            await job.latch.wait()
        } onCancel: {
            job.stop(.abandoned)
        }
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// One request's state: why it was stopped (set once), and the latch its task awaits.
    private final class Job<Value: Sendable>: Sendable {
        let latch = OutcomeLatch<Value>()
        private let reason = Mutex<WorkOutcome<Value>?>(nil)

        /// Why it was told to stop, if it was.
        var stopped: WorkOutcome<Value>? { self.reason.withLock { $0 } }

        /// Tells the work to stop and answers `outcome` now (if nothing answered yet).
        func stop(_ outcome: WorkOutcome<Value>) {
            self.reason.withLock { if $0 == nil { $0 = outcome } }
            self.latch.resolve(outcome)
        }
    }
}
