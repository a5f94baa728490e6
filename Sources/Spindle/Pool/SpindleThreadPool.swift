import Glibc
import Synchronization

/// Threads that several queues share: the role of libdispatch's target queues and of `OperationQueue.underlyingQueue`.
///
/// A queue made with a pool (`SpindleOperationQueue(name:pool:)`) has no threads of its own: the pool's threads
/// run its operations, and it keeps its own width, priorities, suspension, barriers, order, bookkeeping and
/// statistics. At most `threadCount` operations of all its queues run at once (so a queue's width is an upper
/// bound there), and the queues take turns: after a few operations in a row a queue goes to the back of the line.
///
/// - Threads are started as work arrives, up to `threadCount`, and park with nothing to do (no spinning: an idle
///   pool costs no CPU). They are joined when the pool is released, which happens once no queue on it is left
///   (each queue keeps its pool alive).
/// - A pool thread that blocks in one of Spindle's waits (an operation's or a queue's `wait…`, `addOperationAndWait`,
///   a `SpindleSemaphore` or `SpindleWaitGroup`) lets one more thread serve meanwhile, so operations that wait for
///   other operations on the same pool (nested queues, group children) do not starve it. Other blocking (I/O,
///   `sleep`) is not seen: run such work on a queue with its own threads (the default), where each slot is a thread.
/// - `shared` is the process's pool (as many threads as CPUs). Group operations run their children on it.
///
/// Thread-safe; the state lives in `PoolCore` (guards and state machine there). Operations on a pool cannot tell
/// its threads apart from a queue's own, except by `SpindleThread.current.name` ("spindle.pN").
public final class SpindleThreadPool: @unchecked Sendable, CustomStringConvertible {
    let core: PoolCore

    /// The process's pool: as many threads as the CPUs this process may use, started on first use, never released.
    /// A forked child gets a pool of its own (the parent's threads do not exist there).
    public static var shared: SpindleThreadPool { SpindleThreadPool.sharedPerProcess.current }

    private static let sharedPerProcess = PerProcess {
        SpindleThreadPool(checkedName: "SpindleThreadPool.shared", threadCount: spindleActiveProcessorCount())
    }

    /// The most threads a pool may have (a count beyond it is surely a mistake, and would overflow with stand-ins).
    public static let maximumThreadCount = 4096

    /// A pool of as many threads as the CPUs this process may use, named `name` (default "SpindleThreadPool N").
    public convenience init(name: String? = nil) {
        self.init(checkedName: name, threadCount: spindleActiveProcessorCount())
    }

    /// A pool of `threadCount` threads. Made in a process that then forks, it serves only the parent (a child makes
    /// pools of its own; `shared` is one per process).
    /// - Throws: `invalidThreadCount` when `threadCount` is below 1 or above `maximumThreadCount`. Nothing is made
    ///   then.
    public convenience init(name: String? = nil, threadCount: Int) throws(SpindleError) {
        guard threadCount >= 1 && threadCount <= SpindleThreadPool.maximumThreadCount else {
            throw .invalidThreadCount(threadCount)
        }
        self.init(checkedName: name, threadCount: threadCount)
    }

    private init(checkedName name: String?, threadCount: Int) {
        self.core = PoolCore(name: name ?? "SpindleThreadPool \(SpindleThreadPool.numbering.add(1, ordering: .relaxed).newValue)",
                             threadCount: threadCount)
    }

    private static let numbering = Atomic<Int>(0)

    deinit { self.core.shutdown() }

    /// The pool's name (names its diagnostics).
    public var name: String { self.core.name }

    /// How many operations of its queues run at once (more threads only stand in for ones blocked in a wait).
    public var threadCount: Int { self.core.threadCount }

    /// Threads alive now (serving, idle or blocked in a wait) or being started.
    public var liveThreadCount: Int { self.core.threadsAlive }

    /// Threads parked now with nothing to do.
    public var idleThreadCount: Int { self.core.threadsIdle }

    /// "SpindleThreadPool(name, N threads)".
    public var description: String { "SpindleThreadPool(\(self.name), \(self.threadCount) threads)" }

    /// The pool every queue made without one runs on when the environment variable `SPINDLE_QUEUES_ON_POOL` holds
    /// a thread count (at least 1) at the first queue's creation: one pool of that many threads for the whole
    /// process. Otherwise (unset, or not a count) nil, and queues have threads of their own. A switch for running
    /// code written for dedicated threads on shared ones (CI runs the queue test suite that way); read once.
    static var environmentDefault: SpindleThreadPool? {
        SpindleThreadPool.environmentThreads == nil ? nil : SpindleThreadPool.environmentPerProcess.current
    }

    private static let environmentThreads: Int? = {
        guard let raw = getenv("SPINDLE_QUEUES_ON_POOL"), let count = Int(String(cString: raw)),
            count >= 1 && count <= SpindleThreadPool.maximumThreadCount
        else { return nil }
        return count
    }()

    private static let environmentPerProcess = PerProcess {
        SpindleThreadPool(checkedName: "SpindleThreadPool.environment", threadCount: SpindleThreadPool.environmentThreads!)
    }
}
