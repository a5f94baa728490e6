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
///   `SpindleRunLoop.main`); jobs then run whenever that thread runs its loop in a common mode. That thread must
///   outlive every use of the actor: a job enqueued after it exited traps (see `enqueue`).
///
/// Each job is a `perform` on the loop (common modes), so it also runs while the loop's thread runs the loop
/// nested inside another callout. `checkIsolated()` and `isIsolatingCurrentContext()` answer whether the calling
/// thread owns the loop, so `assumeIsolated` works from the loop's own callouts.
///
/// Guards: every stored property is immutable after `init`; the loop and port are thread-safe. Pending jobs keep
/// the executor alive (each perform holds it), so it is released only with no job pending.
/// Threading: `enqueue` from any thread; jobs run on the loop's thread.
public final class SpindleRunLoopExecutor: SerialExecutor, @unchecked Sendable {
    /// The run loop that runs the jobs.
    public let runLoop: SpindleRunLoop
    /// The thread the jobs run on: the one `init(name:)` started, or nil for a loop given to `init(runLoop:)`.
    public let thread: SpindleThread?
    private let keepAlive: SpindlePort<Int>?

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

    /// Schedules `job` on the loop (wakes it). Called by the concurrency runtime; any thread.
    ///
    /// Traps if the loop's thread has exited (possible only with `init(runLoop:)`: that thread must outlive the
    /// actor's use): the job could run on no thread the actor may use, and dropping it would suspend its task for
    /// ever without a word. The same holds for jobs still waiting on the loop when its thread exits.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let accepted = self.runLoop.perform { [self] in job.runSynchronously(on: self.asUnownedSerialExecutor()) }
        precondition(accepted,
                     "SpindleRunLoopExecutor: the thread of \(self.runLoop) has exited; its actor's job cannot run")
    }

    /// Traps unless the calling thread owns the loop (the runtime calls it for `assumeIsolated` checks).
    public func checkIsolated() {
        precondition(self.runLoop.isOwnedByCurrentThread, "not on the thread of \(self.runLoop)")
    }

    /// Whether the calling thread owns the loop.
    public func isIsolatingCurrentContext() -> Bool? { self.runLoop.isOwnedByCurrentThread }
}
