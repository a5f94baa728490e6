import CShim
import Glibc

/// What Spindle knows about the calling thread: its `SpindleThread`, the operation whose `main` runs here and the
/// queue whose worker this is. Confined to its thread (one per thread, in a thread-local), so it needs no lock; the
/// only exception is a Spindle-spawned thread's context, which the spawner makes (with its thread set) before the
/// thread exists and hands over through `pthread_create`.
///
/// Lifetime: created on a thread's first use (or by the spawner), retained by a pthread key until the thread exits;
/// it holds the thread's `SpindleThread` (a retained reference, released in `deinit`), so that object lives at
/// least as long as its thread.
final class ThreadContext {
    /// The operation running `main` on this thread, while it runs (whoever called `start()` keeps it alive); kept
    /// unmanaged so that saving and restoring it around `main` costs no reference counting.
    @exclusivity(unchecked) var operationRef: Unmanaged<SpindleOperation>?
    /// `operationRef`, as a reference.
    var operation: SpindleOperation? { self.operationRef?.takeUnretainedValue() }
    /// The operations whose `main` runs further up this thread's stack, outermost first: one started by hand from
    /// inside another's `main` (a retry's attempt) pushes the outer one here while it runs. Empty in the common
    /// case, so a run pays one test of `operationRef` for it.
    @exclusivity(unchecked) var outerOperations: [Unmanaged<SpindleOperation>] = []

    /// Whether `op`'s `main` runs on this thread: the current operation or one further up the stack.
    func runsMain(of op: SpindleOperation) -> Bool {
        if self.operationRef?.toOpaque() == Unmanaged.passUnretained(op).toOpaque() { return true }
        return self.outerOperations.contains { $0.toOpaque() == Unmanaged.passUnretained(op).toOpaque() }
    }
    /// The operation whose completion block is running on this thread (or the group whose `childDidFinish` runs
    /// here: waiting for that group from there would wait for itself).
    @exclusivity(unchecked) unowned(unsafe) var completing: SpindleOperation?
    /// The queue that owned `completing` (its members still count it until the completion block returns, so
    /// waiting for that queue from the block can never end: `waitUntilAllOperationsAreFinished` throws).
    @exclusivity(unchecked) unowned(unsafe) var completingQueue: SpindleOperationQueue?

    /// Runs `body` (user code on `op`'s own finish or start path: its completion block, its queue's `didFinish`
    /// hook, its observers told there) with this thread marked as `op`'s completer, so that a wait there for `op`
    /// (`waitOnSelf`) or for `queue` (`waitOnOwnQueue`) is told instead of waiting for itself.
    func asCompleting(_ op: SpindleOperation, of queue: SpindleOperationQueue?, _ body: () -> Void) {
        let outer = self.completing
        let outerQueue = self.completingQueue
        self.completing = op
        self.completingQueue = queue
        body()
        self.completing = outer
        self.completingQueue = outerQueue
    }
    /// The queue whose worker is this thread, while it runs one of that queue's operations.
    @exclusivity(unchecked) unowned(unsafe) var queue: SpindleOperationQueue?
    /// Whether this thread is a worker of some queue (for shutdown: a worker never joins itself), or a pool thread
    /// serving that queue (`QueueCore.serveOnPool`).
    @exclusivity(unchecked) unowned(unsafe) var workerOf: QueueCore?
    /// The `SpindleThreadPool` whose thread this is (it outlives its threads' loops); nil elsewhere.
    @exclusivity(unchecked) unowned(unsafe) var poolOf: PoolCore?
    /// The key's destructor has run once at this thread's exit and put the context back for one more round (see
    /// `key`).
    @exclusivity(unchecked) var teardownDeferred = false
    /// 1 while this pool thread is inside a wait its pool was told about (`blocking`), so nested waits tell it once.
    @exclusivity(unchecked) var blockingDepth = 0

    /// The operation this worker is starting: if it finishes synchronously here, its finish path leaves the queue
    /// bookkeeping to the worker (see `QueueCore+Workers`) and parks its queue in `deferredQueue`.
    /// Compared by address only (never dereferenced), so keeping it costs no reference counting.
    @exclusivity(unchecked) var deferrable: UnsafeMutableRawPointer?
    /// The operation its queue is starting on this thread (`QueueCore.run`, for as long as its `start()` runs):
    /// the queue slot this thread works in (`SpindleOperationQueue.slotsHeldByCallingThread`). A block operation's
    /// helper threads carry their owner's while they run its blocks. Compared by address only (never dereferenced).
    @exclusivity(unchecked) var starting: UnsafeMutableRawPointer?
    /// While a worker runs the operations it reserved (`QueueCore.runNextUnlocking`): the operation it took, if it
    /// finished here, and the first reserved one that has run (the others follow through `nextLink`). Their queue
    /// bookkeeping, and with it the release of their waiters, is this thread's to do once the batch is through, so
    /// `waitUntilFinished` on one of them from a later one in the batch returns at once (`finishedEarlierInBatch`)
    /// instead of waiting for itself. Kept unmanaged (the worker holds the queue's references).
    @exclusivity(unchecked) var batchTaken: Unmanaged<SpindleOperation>?
    @exclusivity(unchecked) var batchRan: Unmanaged<SpindleOperation>?
    /// Set by a finish that left its queue bookkeeping to this worker (its queue stays alive until the worker did
    /// it: the operation is still outstanding there).
    @exclusivity(unchecked) var deferredFinish = false

    /// How deeply this thread is continuing gates granted by a release of exclusivity categories (a failed
    /// condition cancels its operation, whose release grants the next: see `SpindleOperation.continueGates`), and
    /// the grants left for the outermost of those calls once the depth limit was reached.
    @exclusivity(unchecked) var gateDepth = 0
    @exclusivity(unchecked) var deferredGates: [(gate: OperationGate, operation: SpindleOperation)] = []

    /// The values of this thread for the `SpindleThreadLocal`s made after the process ran out of pthread keys,
    /// by their number; released with this context, when the thread exits.
    var overflowLocals: [UInt64: AnyObject] = [:]

    /// This thread's `SpindleThread` (`SpindleThread.current`), retained by this context (released in `deinit`):
    /// set by the spawner for a Spindle thread, made on first use for the main thread and threads Spindle did not
    /// create. Unmanaged so that reading it costs no reference counting.
    @exclusivity(unchecked) private var cachedThread: Unmanaged<SpindleThread>?

    /// A context for a thread that has not touched Spindle yet.
    init() {}

    /// The context of a thread about to be spawned (by the spawner, before `pthread_create`).
    init(spawned thread: SpindleThread) { self.cachedThread = Unmanaged.passRetained(thread) }

    deinit { self.cachedThread?.release() }

    /// The thread this context belongs to (made on first use if Spindle did not spawn it).
    var thread: SpindleThread {
        if let thread = self.cachedThread { return thread.takeUnretainedValue() }
        let thread = SpindleThread.identifyCallingThread()
        self.cachedThread = Unmanaged.passRetained(thread)
        return thread
    }

    /// The calling thread's `SpindleThread` if it already has one; creates nothing (no context either).
    static var knownThread: SpindleThread? {
        guard let raw = cshim_tls_context_get() else { return nil }
        return Unmanaged<ThreadContext>.fromOpaque(raw).takeUnretainedValue().cachedThread?.takeUnretainedValue()
    }

    /// Whether `op` finished earlier in the batch this worker is running (see `batchTaken`). At most 8 compares.
    func finishedEarlierInBatch(_ op: SpindleOperation) -> Bool {
        let target = Unmanaged.passUnretained(op).toOpaque()
        if self.batchTaken?.toOpaque() == target { return true }
        var node = self.batchRan
        while let link = node {
            if link.toOpaque() == target { return true }
            node = link._withUnsafeGuaranteedRef { $0.nextLink }
        }
        return false
    }

    /// The worker's batch is through (its bookkeeping comes next).
    func endBatch() {
        self.batchTaken = nil
        self.batchRan = nil
    }

    /// This thread's priority: one atomic load, without retaining the thread object. Inlined into every run.
    @inline(__always)
    var threadPriority: Double {
        if let thread = self.cachedThread { return thread._withUnsafeGuaranteedRef { $0.priority } }
        return self.slowThreadPriority()
    }

    /// The first read on a thread Spindle did not start: `thread` makes its handle.
    @inline(never)
    private func slowThreadPriority() -> Double { self.thread.priority }

    /// The calling thread's context: one plain thread-local load (it is read several times per operation).
    /// Created on first use and retained by a pthread key whose destructor, at thread exit, clears the fast slot
    /// before releasing it, so nothing can see a freed context.
    @inline(__always)
    static var current: ThreadContext {
        if let raw = cshim_tls_context_get() { return Unmanaged<ThreadContext>.fromOpaque(raw).takeUnretainedValue() }
        return ThreadContext.install()
    }

    /// Runs `body` with the calling thread's context, without retaining it (it lives as long as its thread).
    @inline(__always)
    static func withCurrent<R>(_ body: (ThreadContext) throws -> R) rethrows -> R {
        if let raw = cshim_tls_context_get() {
            return try Unmanaged<ThreadContext>.fromOpaque(raw)._withUnsafeGuaranteedRef(body)
        }
        return try body(ThreadContext.install())
    }

    /// Creates the contexts' pthread key now if it does not exist yet (`SpindleThreadLocal`: before it takes a key
    /// of its own, so that running out of keys leaves this one, where its overflow values live).
    static func makeKey() { _ = ThreadContext.key }

    /// The contexts' key. Its destructor defers the context's release by one round of the thread's key
    /// destructors: glibc runs them in key order and this key is made before any `SpindleThreadLocal`'s, so without
    /// the deferral a thread-local value released at exit (user code: its deinit) would find no context
    /// (`SpindleThread.current` a stranger, `joinSelf` unseen). The first call sets the value again, which makes
    /// glibc run another round after the other keys' destructors; the second releases it.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        checkPthread(pthread_key_create(&key) { raw in
            guard let raw else { return }
            let context = Unmanaged<ThreadContext>.fromOpaque(raw)
            let deferred = context._withUnsafeGuaranteedRef { context -> Bool in
                if context.teardownDeferred { return false }
                context.teardownDeferred = true
                return pthread_setspecific(ThreadContext.key, raw) == 0
            }
            if deferred { return }  // still installed for the other keys' destructors of this round
            cshim_tls_context_set(nil)
            context.release()
        }, "pthread_key_create")
        return key
    }()

    /// First thing on a new Spindle thread: makes `raw` (a context the spawner passed retained) this thread's
    /// context; the pthread key takes over that reference.
    static func installSpawned(_ raw: UnsafeMutableRawPointer) -> ThreadContext {
        checkPthread(pthread_setspecific(ThreadContext.key, raw), "pthread_setspecific")
        cshim_tls_context_set(raw)
        return Unmanaged<ThreadContext>.fromOpaque(raw).takeUnretainedValue()
    }

    @inline(never)
    private static func install() -> ThreadContext {
        let context = ThreadContext()
        let raw = Unmanaged.passRetained(context).toOpaque()
        checkPthread(pthread_setspecific(ThreadContext.key, raw), "pthread_setspecific")
        cshim_tls_context_set(raw)
        return context
    }
}
