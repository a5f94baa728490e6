/// A thread of its own that runs a run loop until `shutdown()`: the long-lived loop thread a service keeps for ports,
/// timers and performs, with no dummy source to keep it alive and a stop that joins it.
///
/// The thread holds its loop open (`RunLoopState.heldOpen`): its outermost run waits in the kernel, at no CPU, even
/// with nothing registered; a `stop()` someone else sends the loop only makes it look again. `shutdown` stops it
/// for good (`RunLoopState.stopForGood`, which a nested run cannot consume): the current callout finishes, then
/// what is ready in the default mode (performs, port messages, due timers, and the events of descriptor sources that
/// are ready then) is served until a pass finds nothing to do (performs queued after the shutdown began are not run:
/// a perform that queues itself again cannot hold the thread), then the loop becomes *exited*
/// (`SpindleRunLoop.ownerDidExit`: ports invalidated too late for the last pass get their invalidation handler on
/// this thread, what is still scheduled counts as unscheduled and can move to a
/// live loop, later `perform`s return false), then the thread exits and is joined. `runLoop` stays readable after
/// the shutdown, as an exited loop.
///
/// Guards: `control` (a pthread mutex and condition) guards `state`; the loop's two flags are under the loop's own
/// lock. Lock order: `control`, then the loop's lock. The thread's body holds `control` and the loop,
/// never `self`, so releasing the last reference without `shutdown` is possible: `deinit` then asks the loop to
/// stop and detaches the thread, which exits after its current callout (nothing blocks in `deinit`).
///
/// States (`Control.State`), forward only, all under `control`: `running` → `stopping` (`shutdown` or `deinit`
/// asked it to stop) → `exited` (the body is past its last pass and its loop is exited) → `joining` (one
/// `shutdown` call reaps the thread, without the lock) → `joined` (later calls return at once). Overlapping
/// `shutdown` calls wait for `joined`.
public final class SpindleRunLoopThread: @unchecked Sendable, CustomStringConvertible {
    /// The loop the thread runs: add ports, timers and descriptor sources to it, or `perform` blocks on it, from
    /// any thread. Once the thread has exited (after `shutdown`), the loop is exited: see `SpindleRunLoop`.
    public let runLoop: SpindleRunLoop
    /// The thread running `runLoop`.
    public let thread: SpindleThread
    private let control: Control

    final class Control: @unchecked Sendable {
        enum State: UInt8 { case running, stopping, exited, joining, joined }
        let condition = SpindleCondition()
        var state = State.running  // protected by condition's mutex
        /// Signalled once by the body as it exits; a task awaiting the exit passes it on (see `shutdown() async`).
        let exitSignal = try! SpindleSemaphore(value: 0)  // 0 is a valid value
    }

    /// Starts a thread named `name` and returns once its run loop is running.
    /// - Throws: `SpindleError.system` if the thread could not be created ("pthread_create") or its loop's wakeup
    ///   descriptor could not be opened ("eventfd"); no thread is left behind then.
    public init(name: String = "spindle-runloop", stackSize: Int? = nil, priority: Double = 0.5) throws(SpindleError) {
        let control = Control()
        let started = Started()
        let thread = try SpindleThread.spawnJoinable(name: name, stackSize: stackSize, priority: priority) {
            SpindleRunLoopThread.body(control, started)
        }
        started.ready.wait()
        guard let loop = started.loop else {
            try? thread.join()  // the body returned at once
            throw started.error ?? .system(function: "eventfd", errno: 0)
        }
        self.thread = thread
        self.runLoop = loop
        self.control = control
    }

    /// What the new thread hands back to `init`: its loop, or why it could not run one.
    private final class Started: @unchecked Sendable {
        let ready = try! SpindleSemaphore(value: 0)  // 0 is a valid value
        var loop: SpindleRunLoop? = nil  // written before `ready.signal()`, read after `ready.wait()`
        var error: SpindleError? = nil  // likewise
    }

    /// The thread's life: hold the loop alive, run it until asked to stop for good, serve what is already queued,
    /// mark the loop exited, report the exit.
    private static func body(_ control: Control, _ started: Started) {
        let loop = SpindleRunLoop.current
        do {
            try loop.prepareToRun()
        } catch {
            started.error = error
            started.ready.signal()
            return
        }
        loop.state.withLock { $0.heldOpen = true }
        started.loop = loop
        started.ready.signal()
        while !loop.state.withLock({ $0.stopForGood }) {
            try? loop.run()  // held open: returns only for a stop; cannot throw here (owner, descriptor open)
        }
        loop.state.withLock {
            $0.heldOpen = false
            $0.stopForGood = false
        }
        loop.serveReadyWork(mode: .default)  // what was queued before the stop
        // The loop is exited from here on, before `shutdown` can return: ports invalidated after the last pass are
        // retired now, on this thread (the thread-local slot's own call, as the thread ends, then does nothing).
        loop.ownerDidExit()
        control.condition.withLock {
            control.state = .exited
            control.condition.broadcast()
        }
        control.exitSignal.signal()
    }

    deinit {
        if self.runLoop.isInherited { return }  // a forked child's copy: its thread and locks are the parent's
        let stopped = self.requestStop()
        if stopped { self.thread.relinquish() }  // not joined by a shutdown: let it go (it exits on its own)
    }

    /// Asks the loop to stop for good (`running` → `stopping`, once; later calls change nothing, and never send
    /// the loop a plain stop that could cut its last pass short); returns whether nobody has joined the thread or
    /// begun to.
    @discardableResult
    private func requestStop() -> Bool {
        self.control.condition.withLock { () -> Bool in
            if self.control.state == .running {
                self.control.state = .stopping
                self.runLoop.state.withLock { $0.stopForGood = true }
                self.runLoop.wakeUp()
            }
            return self.control.state != .joined && self.control.state != .joining
        }
    }

    /// Stops the loop for good and waits until the thread has served what was queued and exited, then joins it.
    /// Idempotent: later calls (and calls that overlap it) return once the thread is joined.
    /// - Throws: `SpindleError.forkedChild` in a forked child, for a loop thread made before the fork (its thread
    ///   is in the parent); `SpindleError.joinSelf` when called on the loop's own thread (nothing changes then: it
    ///   would wait for itself).
    public func shutdown() throws(SpindleError) {
        _ = try self.shutdown(until: .distantFuture)
    }

    /// `shutdown()`, waiting at most until `deadline`. Returns whether the thread was joined; false when a callout
    /// still runs at the deadline (the stop stands, and a later call joins it). On a `SpindleThreadPool`'s thread the
    /// wait is one the pool sees (a callout may be waiting for work on that pool).
    /// - Throws: `SpindleError.forkedChild` and `SpindleError.joinSelf`, as `shutdown()`.
    public func shutdown(until deadline: SpindleDeadline) throws(SpindleError) -> Bool {
        if self.runLoop.isInherited { throw .forkedChild(name: self.thread.name) }
        if SpindleThread.current === self.thread { throw .joinSelf(name: self.thread.name) }
        self.requestStop()
        return ThreadContext.current.blocking { self.waitForThread(until: deadline) }
    }

    /// The rest of `shutdown(until:)`: waits for the thread past its last pass, and joins it (one caller does).
    private func waitForThread(until deadline: SpindleDeadline) -> Bool {
        let control = self.control
        control.condition.lock()
        defer { control.condition.unlock() }
        while true {
            switch control.state {
            case .joined:
                return true
            case .exited:
                control.state = .joining  // this call joins; overlapping ones wait for `joined`
                control.condition.unlock()
                try? self.thread.join()  // its body is past its last pass: this only reaps it
                control.condition.lock()
                control.state = .joined
                control.condition.broadcast()
                return true
            case .running, .stopping, .joining:
                if !control.condition.wait(until: deadline) && deadline.hasPassed { return false }
            }
        }
    }

    /// `shutdown()` from a task: suspends until the thread is past its last pass (no thread blocks meanwhile), then
    /// reaps it, which waits at most for the thread's final return.
    /// - Throws: `CancellationError` if the task is cancelled first (the stop stands; the thread is not joined yet,
    ///   a later `shutdown` joins it); `SpindleError.joinSelf` from the loop's own thread.
    public func shutdown() async throws {
        if self.runLoop.isInherited { throw SpindleError.forkedChild(name: self.thread.name) }
        if SpindleThread.current === self.thread { throw SpindleError.joinSelf(name: self.thread.name) }
        self.requestStop()
        try await self.control.exitSignal.wait()
        self.control.exitSignal.signal()  // pass it on: other tasks awaiting the exit get through too
        _ = try self.shutdown(until: .distantFuture)  // exited: this only reaps the thread
    }

    /// The thread's name and whether it still runs its loop.
    public var description: String {
        if self.runLoop.isInherited { return "SpindleRunLoopThread(\(self.thread.name), made before fork())" }
        let state = self.control.condition.withLock { self.control.state }
        return "SpindleRunLoopThread(\(self.thread.name), \(state))"
    }
}
