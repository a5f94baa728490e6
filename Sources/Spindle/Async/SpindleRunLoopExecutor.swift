import Synchronization

/// A `SerialExecutor` that runs every job on one thread, through that thread's `SpindleRunLoop`: for an actor
/// that must stay on one thread (a C library with thread affinity). Give the actor
/// `nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }` and keep the
/// executor in a stored property: every job of that actor then runs on `thread`, one at a time, in the order
/// enqueued.
///
/// Two ways to get one:
/// - `init(name:)` starts a Spindle thread that runs its loop until the executor is released (a keep-alive port
///   stops the empty loop from returning, and a `stop()` of the loop only makes it run again; releasing the
///   executor invalidates the port and the thread exits);
/// - `init(runLoop:)` uses a loop some thread already runs (for example the main thread running
///   `SpindleRunLoop.main`); jobs then run whenever that thread runs its loop in a common mode. That thread should
///   outlive every use of the actor. If it exits first, the executor *moves*: the jobs still waiting on the loop,
///   and every job enqueued later, run on a thread the executor starts (its stand-in, an executor made with
///   `init(name:)`), still one at a time and in the order enqueued (the exiting loop hands its waiting jobs over
///   before it runs any port's invalidation handler); the move is reported once to `SpindleDiagnostics`
///   (`.runLoopExecutorMoved`). Nothing is dropped and no task waits for ever. A job's thread affinity is lost
///   with its thread; that is why the move is reported.
///
/// Each job is a `perform` on the loop (common modes), so it also runs while the loop's thread runs the loop
/// nested inside another callout. `checkIsolated()` and `isIsolatingCurrentContext()` answer whether the calling
/// thread owns the loop (or, after a move, the stand-in's loop), so `assumeIsolated` works from the loop's own
/// callouts.
///
/// State: `runLoop`, `thread` and `keepAlive` are immutable after `init`; the loop and port are thread-safe.
/// `moving` is under its own lock (a leaf lock but for the loop's own: jobs are handed to the stand-in's loop with it
/// held, and the stand-in is started with it held, so that exactly one is): `standIn`, nil → set once by the first
/// job that finds the loop's thread gone (a perform refused, or a pending job dropped by the exiting loop), never
/// changed back; `held`, jobs enqueued after the move while earlier ones are still on their way to the stand-in.
/// `onLoop` (atomic) counts the jobs given to the loop and neither run nor moved yet. Order after a move: a job
/// enqueued once `standIn` is set waits in `held` while `onLoop > 0` (the exiting loop is still handing over the
/// jobs it dropped, one by one), and the move that takes `onLoop` to zero hands `held` over after its own job, so
/// jobs run in the order enqueued. Pending jobs keep the executor alive (each holds it), so it is released only
/// with no job pending.
/// Threading: `enqueue` from any thread; jobs run on the loop's thread (after a move: the stand-in's).
public final class SpindleRunLoopExecutor: SerialExecutor, @unchecked Sendable {
    /// The run loop that runs the jobs.
    public let runLoop: SpindleRunLoop
    /// The thread the jobs run on: the one `init(name:)` started, or nil for a loop given to `init(runLoop:)`.
    public let thread: SpindleThread?
    private let keepAlive: SpindlePort<Int>?
    /// After a move (see the type's notes): the executor whose thread runs the jobs, and the jobs held back until
    /// the earlier ones are over there.
    private struct Moving {
        var standIn: SpindleRunLoopExecutor? = nil
        var held: [UnownedJob] = []
    }
    private let moving = SpindleLockedValue(Moving())
    /// Jobs given to the loop and neither run nor moved yet (see the type's notes).
    fileprivate let onLoop = Atomic<Int>(0)

    /// Starts a thread named `name` that runs its run loop for this executor until the executor is released.
    /// Any thread; returns once the thread's loop is ready.
    /// - Throws: `SpindleError.system` if the thread cannot be created.
    public init(name: String = "spindle-actor") throws(SpindleError) {
        let port = SpindlePort<Int>(name: name) { _ in }
        let ready = try! SpindleSemaphore(value: 0)  // 0 is a valid value
        let started = SpindleLockedValue<SpindleRunLoop?>(nil)
        let thread = try SpindleThread.detach(name: name) {
            let loop = SpindleRunLoop.current
            try! loop.add(port)  // a new port, on its own thread's loop: cannot fail
            started.withLockedValue { $0 = loop }
            ready.signal()
            // Until the executor is released: a `stop()` someone sends the (public) loop only makes it run again,
            // so the thread, and the actor's jobs with it, never end before the executor does.
            while port.isValid { _ = try? loop.run(untilInvalidated: port) }
        }
        ready.wait()
        self.runLoop = started.value!
        self.thread = thread
        self.keepAlive = port
    }

    /// Runs jobs on `runLoop`, which its own thread must run (in a common mode) for anything to happen.
    public init(runLoop: SpindleRunLoop) {
        self.runLoop = runLoop
        self.thread = nil
        self.keepAlive = nil
    }

    deinit {
        self.keepAlive?.invalidate()  // the started thread's loop returns and the thread exits
    }

    /// Schedules `job` on the loop (wakes it), or after a move on the stand-in's. Called by the concurrency runtime;
    /// any thread.
    ///
    /// A job the loop will not run (its thread has exited: the perform is refused, or dropped by the exiting loop)
    /// is handed to the stand-in when its `PendingJob` is released unrun. Traps only if the loop's thread has
    /// exited and no thread can be started for the stand-in (`pthread_create` failing): the job could then run
    /// nowhere.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let handed = self.moving.withLockedValue { moving -> Bool in
            guard let standIn = moving.standIn else { return false }
            if self.onLoop.load(ordering: .acquiring) > 0 || !moving.held.isEmpty {
                moving.held.append(job)  // behind jobs enqueued earlier and still being moved
            } else {
                standIn.perform(job, as: self)
            }
            return true
        }
        if handed { return }
        self.onLoop.add(1, ordering: .relaxed)
        let pending = PendingJob(job, executor: self)
        _ = self.runLoop.perform { pending.run() }  // refused: released here, unrun, and so moved (its deinit)
    }

    /// Runs `job` on this executor's loop as a job of `owner` (a moved executor). Stand-ins only.
    private func perform(_ job: UnownedJob, as owner: SpindleRunLoopExecutor) {
        let accepted = self.runLoop.perform { job.runSynchronously(on: owner.asUnownedSerialExecutor()) }
        // A stand-in's thread runs until the stand-in is released, and its owner holds it.
        precondition(accepted, "SpindleRunLoopExecutor: the stand-in thread of \(owner.runLoop) has exited")
    }

    /// A job the loop's thread will never run: starts the stand-in if there is none yet, runs the job there, and
    /// the held ones after it if it was the last on its way; then reports the move (once). Called with no lock of
    /// ours held (from a `PendingJob`'s deinit).
    fileprivate func move(_ job: UnownedJob) {
        var started = false
        let standIn = self.moving.withLockedValue { moving -> SpindleRunLoopExecutor? in
            if moving.standIn == nil {
                let name = self.thread?.name ?? "spindle-actor"
                moving.standIn = try? SpindleRunLoopExecutor(name: name)
                started = moving.standIn != nil
            }
            guard let standIn = moving.standIn else { return nil }
            standIn.perform(job, as: self)
            if self.onLoop.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
                for held in moving.held { standIn.perform(held, as: self) }
                moving.held = []
            }
            return standIn
        }
        guard let standIn else {
            fatalError("SpindleRunLoopExecutor: the thread of \(self.runLoop) has exited and no thread could be started to run its actor's jobs")
        }
        if started {
            SpindleDiagnostics.report(.runLoopExecutorMoved(runLoop: "\(self.runLoop)", threadID: standIn.thread?.threadID ?? 0))
        }
    }

    /// Traps unless the calling thread owns the loop, or after a move the stand-in's (the runtime calls it for
    /// `assumeIsolated` checks).
    public func checkIsolated() {
        precondition(self.isOnItsThread, "not on the thread of \(self.runLoop)")
    }

    /// Whether the calling thread owns the loop, or after a move the stand-in's.
    public func isIsolatingCurrentContext() -> Bool? { self.isOnItsThread }

    private var isOnItsThread: Bool {
        if self.runLoop.isOwnedByCurrentThread { return true }
        return self.moving.withLockedValue { $0.standIn }?.runLoop.isOwnedByCurrentThread ?? false
    }
}

/// One job on its way through a loop's performs: run by the loop, or, if the loop lets go of it unrun (its thread
/// has exited), moved to the executor's stand-in by `deinit`. `ran` is only touched by the loop's thread, which
/// holds the perform, before the last reference goes.
private final class PendingJob: @unchecked Sendable {
    private let job: UnownedJob
    private let executor: SpindleRunLoopExecutor
    private var ran = false

    init(_ job: UnownedJob, executor: SpindleRunLoopExecutor) {
        self.job = job
        self.executor = executor
    }

    func run() {
        self.ran = true
        self.executor.onLoop.subtract(1, ordering: .relaxed)
        self.job.runSynchronously(on: self.executor.asUnownedSerialExecutor())
    }

    deinit {
        if !self.ran { self.executor.move(self.job) }
    }
}
