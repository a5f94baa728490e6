import CShim
import Synchronization

/// Something Spindle met that its caller could not be told through a return value or an error: a thread that
/// could not be started for a queue, a joinable thread released without `join()`, the deadline timer failing
/// to start. Delivered to the handler set with `SpindleDiagnostics.setHandler`.
public enum SpindleDiagnosticEvent: Sendable, Equatable, CustomStringConvertible {
    /// A queue, or a `SpindleThreadPool` (`queue` is then the pool's name), could not start a worker thread
    /// (`pthread_create` failed with `errno`). Its ready operations were handed to an idle worker if there was one;
    /// otherwise the queue tries again after `retryNanoseconds`, on the deadline timer's thread (if that thread
    /// cannot start either: on the thread whose start failed, which waits that long, when that thread is not one of
    /// the queue's workers or the queue has no worker, or when every thread of the pool is blocked in a wait; else
    /// when a worker comes back for the work, or at the queue's next event). The wait doubles on each
    /// failure in a row, from 1 ms up to 1 s. A pool reports a `retryNanoseconds` of 0 when it needs no retry
    /// (threads on their way take every request waiting, or a retry is already pending).
    case workerSpawnFailed(queue: String, errno: Int32, retryNanoseconds: UInt64)
    /// A queue (or a pool) started a worker thread again after `failures` failed attempts in a row.
    case workerSpawnRecovered(queue: String, failures: Int)
    /// A block operation could not start a helper thread for its extra blocks (`errno`); the threads already
    /// taking part ran them instead (fewer at once, none lost).
    case blockHelperSpawnFailed(errno: Int32)
    /// A joinable `SpindleThread` was released without `join()`; Spindle detached it so its resources are freed.
    case threadReleasedWithoutJoin(name: String)
    /// The process-wide deadline timer thread could not start (`errno`): armed deadlines wait until the next one
    /// is armed, which tries again; a queue's spawn retry is run by the thread whose start failed instead, or at
    /// the queue's next event (see `workerSpawnFailed`).
    case deadlineTimerFailedToStart(errno: Int32)
    /// `pthread_atfork` failed (`errno`, ENOMEM): Spindle cannot tell a forked child from its parent, so a queue
    /// made before a fork is not refused in the child (see `SpindleError.forkedChild`).
    case forkTrackingUnavailable(errno: Int32)
    /// `maxConcurrentOperationCount` was set to `value`, a negative width other than -1, on the queue named
    /// `queue`: the width was left as it was (`setMaxConcurrentOperationCount` throws `invalidConcurrencyLimit`
    /// instead).
    case invalidConcurrencyLimitIgnored(queue: String, value: Int)
    /// The thread of `runLoop`, the loop a `SpindleRunLoopExecutor` was made with (`init(runLoop:)`), exited while
    /// the executor was still in use: its pending and later jobs run, one at a time as before, on a thread the
    /// executor started (kernel id `threadID`). Reported once per executor.
    case runLoopExecutorMoved(runLoop: String, threadID: Int32)
    /// A run loop's poll(2) failed with `errno`. EINVAL: it watched more descriptors (`watched`) than RLIMIT_NOFILE
    /// allows, a limit lowered after they were added (`add` refuses past it), so it watched only the first `polled`
    /// until the count or the limit changes. ENOMEM (`polled` 0): that pass waited up to 1 ms instead and looked
    /// again. Reported once per process for each errno.
    case runLoopPollFailed(errno: Int32, watched: Int, polled: Int)

    /// One line, for a log.
    public var description: String {
        switch self {
        case .workerSpawnFailed(let queue, let errno, let retry) where retry == 0:
            "queue '\(queue)' could not start a worker thread (errno \(errno))"
        case .workerSpawnFailed(let queue, let errno, let retry):
            "queue '\(queue)' could not start a worker thread (errno \(errno)); retrying in \(retry / 1_000_000) ms"
        case .workerSpawnRecovered(let queue, let failures):
            "queue '\(queue)' started a worker thread after \(failures) failed attempts"
        case .blockHelperSpawnFailed(let errno):
            "a block operation could not start a helper thread (errno \(errno)); its blocks ran on fewer threads"
        case .threadReleasedWithoutJoin(let name):
            "joinable thread '\(name)' released without join(); detached it"
        case .deadlineTimerFailedToStart(let errno):
            "the deadline timer thread could not start (errno \(errno)); the next deadline armed tries again"
        case .forkTrackingUnavailable(let errno):
            "pthread_atfork failed (errno \(errno)); queues made before a fork are not refused in the child"
        case .invalidConcurrencyLimitIgnored(let queue, let value):
            "queue '\(queue)': maxConcurrentOperationCount = \(value) ignored (negative; only -1, the default, is allowed)"
        case .runLoopExecutorMoved(let runLoop, let threadID):
            "the thread of \(runLoop) exited while its SpindleRunLoopExecutor was in use; its jobs now run on thread \(threadID)"
        case .runLoopPollFailed(let errno, let watched, let polled):
            "a run loop's poll failed (errno \(errno)) watching \(watched) descriptors; it watched \(polled) instead"
        }
    }
}

/// Where Spindle reports `SpindleDiagnosticEvent`s. Spindle never writes to standard error or standard output
/// itself: with no handler set (the default), events are only counted (`eventCount`); a service routes them to
/// its logger with `setHandler`.
///
/// The handler is called on the thread where the event happened, never while a lock of Spindle's is held, and
/// may be called from several threads at once. It must not block for long (it may run on a queue's worker).
///
/// State: the handler is under the lock of `slot`'s instance for this process (a leaf lock: nothing else is taken
/// while holding it; the handler is read under it and called after unlocking; a replaced one is released after
/// unlocking). Per process (`PerProcess`, keyed by `ForkGeneration.current`, which starts fork tracking the first
/// time anything, reporting included, asks: until then a fork would go unnoticed): a parent thread inside `setHandler` or `report` at a `fork()` would leave
/// the lock held for ever in the child. So a forked child starts with no handler: set it again there. `count` is
/// an atomic.
public enum SpindleDiagnostics {
    private final class HandlerSlot: Sendable {
        let handler = SpindleLockedValue<(@Sendable (SpindleDiagnosticEvent) -> Void)?>(nil)
    }

    private static let slot = PerProcess { HandlerSlot() }
    private static let count = Atomic<Int>(0)

    /// Sets the process-wide handler (nil: events are only counted). Returns the previous one.
    @discardableResult
    public static func setHandler(
        _ handler: (@Sendable (SpindleDiagnosticEvent) -> Void)?
    ) -> (@Sendable (SpindleDiagnosticEvent) -> Void)? {
        self.slot.current.handler.withLockedValue { current in
            let previous = current
            current = handler
            return previous  // released by the caller, after unlocking
        }
    }

    /// Events reported since the process started, handled or not.
    public static var eventCount: Int { self.count.load(ordering: .relaxed) }

    /// Reports `event`. Callers hold no lock of ours.
    static func report(_ event: SpindleDiagnosticEvent) {
        self.count.wrappingAdd(1, ordering: .relaxed)
        let handler = self.slot.current.handler.withLockedValue { $0 }
        handler?(event)
    }
}
