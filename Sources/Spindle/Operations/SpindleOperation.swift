import Synchronization

/// A unit of work with a state machine, dependencies, a priority and a completion block (NSOperation's role).
///
/// Subclass it and override `main()` for a synchronous operation; subclass `SpindleConcurrentOperation` for one
/// whose work ends later on another thread; or use `SpindleBlockOperation` / `SpindleInvocationOperation`.
///
/// State machine: see `OperationState` (idle → [enqueued → dispatching →] executing → finishing → finished, plus
/// the cancelled bit and counted readiness). All reads (`isReady`, `isExecuting`, `isFinished`, `isCancelled`) are
/// one lock-free atomic load of `state`.
///
/// Guards:
/// - `state`: atomic; transitions by compare-and-swap. `finishing → finished` additionally happens under `lockWord`
///   so that a dependency added concurrently sees either "not finished" (and is counted) or "finished".
/// - `lockWord` (an `InlineLock`, no allocation) guards `lockedState` (owning queue, and the side object `extras`:
///   completion block, dependencies, dependents, observers and pending events, waiters, error, name, thread
///   priority, cancellation reason, armed deadline entry) and `dependentsReleased`.
/// - queue fields (`nextLink` once admitted, `bucketPrev`, `bucketLevel`, `memberNext`, `memberPrev`, `isBarrier`,
///   `placement`, `isTimed`): guarded by the owning queue's lock. Before
///   admission `nextLink` is the inbox link, written by the adding thread before its push publishes it; once a
///   worker has claimed it from its reservation, or taken it and run it, `nextLink` is that worker's (chaining
///   the operations whose bookkeeping it does together, then the finished ones whose references it keeps a while:
///   `AfterUnlock`, "Retiring").
/// - `hasObservers`, `hasThreadPriority`, `priorityStorage`: atomics; the first two are hints whose truth is in
///   `extras` (under `lockWord`).
///
/// Lock order: `DependencyGraph.lock` → a queue's lock → an operation's `locked` → `DeadlineTimer.lock`;
/// `ExclusivityController.lock` is a leaf after all of them (it may be taken under any, and nothing is taken under
/// it). Never two operations' `locked` at once. A group's `lock` (`SpindleGroupOperation`) is a leaf outside this
/// order: it is never taken while any of these is held, and nothing is taken while it is held. No user code
/// (`main`, completion blocks, observers, conditions) ever runs under any of these.
open class SpindleOperation: @unchecked Sendable, CustomStringConvertible {
    // MARK: Stored state
    // Laid out so that a plain operation is small (88 bytes; a one-block `SpindleBlockOperation` 104), inside
    // glibc's fast bins (chunks up to 128 bytes) even when an allocator in front adds a 16-byte header, as
    // package-benchmark's malloc interposer does: rarely used fields, the completion block among them, live in
    // `OperationExtras`, allocated on first use.
    let state = Atomic<UInt64>(0)
    let lockWord = InlineLock()
    let hasObservers = Atomic<Bool>(false)

    // Owned by the queue (under its lock): flags and intrusive links, so enqueueing allocates nothing.
    @exclusivity(unchecked) var bucketLevel: Int8 = -1
    @exclusivity(unchecked) var isBarrier = false
    /// Where it is in its queue, and so who owns the queue's reference to it (see `QueuePlacement`).
    @exclusivity(unchecked) var placement = QueuePlacement.outside
    /// Its admission time is in `extras.admittedAt` (its queue collects wait times).
    @exclusivity(unchecked) var isTimed = false
    /// Set (under `lockWord`) once the finish path took `dependents`; later dependencies are not counted.
    @exclusivity(unchecked) var dependentsReleased = false
    let priorityStorage = Atomic<Int8>(0)
    /// Whether `threadPriority` was set (its value is then in `extras`); the default 0.5 needs no side object.
    let hasThreadPriority = Atomic<Bool>(false)
    /// Set (and never cleared) once anyone registered in `waiters`, or a group linked it as a child; lets the
    /// finish path skip the lock otherwise (see `releaseWaiters`).
    let hasWaiters = Atomic<Bool>(false)
    /// Set (never cleared) by its queue just before the queue calls `start()`. Until then a queue-owned operation
    /// is the queue's to start (`start()` elsewhere throws `operationEnqueued`); from then on its own `start()` code
    /// decides, on whatever thread it moves to (see `claimExecution`).
    let queueCalledStart = Atomic<Bool>(false)
    /// In the queue's inbox: the next older operation there (written by the adding thread before the push
    /// publishes it). In a ready bucket: the next one there. The two uses never overlap.
    @exclusivity(unchecked) var nextLink: Unmanaged<SpindleOperation>? = nil
    @exclusivity(unchecked) var bucketPrev: Unmanaged<SpindleOperation>? = nil
    @exclusivity(unchecked) var memberNext: Unmanaged<SpindleOperation>? = nil
    @exclusivity(unchecked) var memberPrev: Unmanaged<SpindleOperation>? = nil

    @exclusivity(unchecked) var lockedState = Locked()  // protected by lockWord: reach it only through `withLocked`

    /// A new operation: idle, ready, not cancelled, normal queue priority, thread priority 0.5, no dependencies and
    /// no completion block. Any thread; throws nothing.
    public init() {}

    deinit {
        guard let extras = self.lockedState.extras else { return }
        // Armed and dropped without finishing (never added, or refused by a full queue): out of the timer's heap.
        if let entry = extras.deadlineEntry { DeadlineTimer.shared.remove(entry) }
        guard !extras.dependencies.isEmpty else { return }
        // Dependencies that have not released their dependents yet still list us: unlist ourselves.
        SpindleOperation.unlist(Unmanaged.passUnretained(self), from: extras.dependencies)
        // Release finished dependency chains iteratively: a 100,000-long chain released recursively would overflow
        // the stack. Any dependency held only by us is emptied of its own dependencies before it goes (and unlisted
        // from them first, as its own deinit will no longer see them).
        var pending = InlineFirstList<SpindleOperation>()  // a chain keeps one here at a time: no allocation
        extras.dependencies.moveAll(into: &pending)
        while var op = pending.popLast() {
            if isKnownUniquelyReferenced(&op), let more = op.lockedState.extras, !more.dependencies.isEmpty {
                SpindleOperation.unlist(Unmanaged.passUnretained(op), from: more.dependencies)
                more.dependencies.moveAll(into: &pending)
            }
        }
    }

    /// Runs `body` with the operation's lock held, on its lock-protected state. Never calls user code inside.
    @inline(__always)
    final func withLocked<R, E: Error>(_ body: (inout Locked) throws(E) -> R) throws(E) -> R {
        self.lockWord.lock()
        defer { self.lockWord.unlock() }
        return try body(&self.lockedState)
    }

    // MARK: - State (lock-free reads)

    @inline(__always) var currentState: OperationState { OperationState(raw: self.state.load(ordering: .acquiring)) }

    /// Whether it may start: no unfinished dependency holds it back, or it was cancelled. Finished ones are ready.
    ///
    /// Final (one atomic read). Porting an `isReady` override: a condition (`addCondition`, evaluated once the
    /// dependencies are done) or an exclusivity category (`addExclusivityCategory`); a gate opened from elsewhere is
    /// a dependency on an operation you finish when it opens.
    public final var isReady: Bool { self.currentState.isReady }
    /// Whether `main` (or a concurrent operation's work) is running.
    ///
    /// Final. Porting a KVO-driven `isExecuting`/`isFinished` pair: override `start()`, call `beginExecuting()`,
    /// and `finish(throwing:)` when the work ends (from any thread); observers see the changes as KVO would.
    public final var isExecuting: Bool { self.currentState.lifecycle == .executing }
    /// Whether it has finished (by running or by being cancelled). Never reverts. Final: see `isExecuting`.
    public final var isFinished: Bool { self.currentState.lifecycle == .finished }
    /// Whether `cancel()` was called before it began finishing. Final: to act on a cancel, override `cancel()`
    /// and call `super.cancel()`, or observe `.isCancelled`.
    public final var isCancelled: Bool { self.currentState.isCancelled }
    /// Whether its work ends after `start()` returns (concurrent operations). Plain operations: false.
    open var isAsynchronous: Bool { false }
    /// Foundation's older name for `isAsynchronous`: unavailable, so that a ported `override var isConcurrent` is
    /// told to override `isAsynchronous` (declared here, not in an extension, so that the override meets this).
    @available(*, unavailable, renamed: "isAsynchronous")
    open var isConcurrent: Bool { self.isAsynchronous }
    /// Whether it is a `SpindleGroupOperation` (overridden there): one dynamic call, cheaper than a cast.
    var isGroup: Bool { false }

    /// A name for diagnostics and errors; nil by default. Thread-safe.
    public final var name: String? {
        get { self.withLocked { $0.name } }
        set { self.withLocked { $0.name = newValue } }
    }

    /// The name, or else "Type@0x…" with the object's address in hexadecimal (as Foundation's descriptions show
    /// it): the same for the operation's whole life, but an address a later object may reuse once it is freed.
    public final var displayName: String { self.name ?? self.defaultName }

    /// "Type@0xADDRESS", the object's real address (`ObjectIdentifier`'s bit pattern, not its hash, which is
    /// seeded per process): needs no lock, so it can be used while the operation's lock is held.
    final var defaultName: String {
        "\(type(of: self))@0x\(String(UInt(bitPattern: ObjectIdentifier(self)), radix: 16))"
    }

    /// The error `main` threw, if any (also set by `finish(throwing:)`).
    public final var error: (any Error)? { self.withLocked { $0.error } }

    /// The display name and the current state (lifecycle, cancelled bit, unfinished dependencies), for diagnostics.
    /// Any thread; a snapshot that may be stale at once.
    open var description: String { "\(self.displayName) [\(self.currentState)]" }

    // MARK: - Priorities

    /// Where it stands among ready operations in its queue. Changing it while it waits takes effect at once.
    public final var queuePriority: QueuePriority {
        get { QueuePriority.rounding(Int(self.priorityStorage.load(ordering: .relaxed))) }
        set {
            let raw = Int8(newValue.rawValue)
            if self.hasObservers.load(ordering: .relaxed) {
                guard self.exchangeObservedPriority(newValue) else { return }
            } else {
                let old = self.priorityStorage.exchange(raw, ordering: .sequentiallyConsistent)
                guard old != raw else { return }
                // An observer registered meanwhile (it reads the priority after setting the flag): tell it, under
                // the lock and only if no later set replaced this value (that one recorded its own change, whose
                // old value is ours: recording ours after it would deliver them out of order).
                if self.hasObservers.load(ordering: .sequentiallyConsistent) {
                    let drain = self.withLocked { l -> Bool in
                        guard self.priorityStorage.load(ordering: .sequentiallyConsistent) == raw else { return false }
                        return l.recordObservation(.queuePriority, from: .priority(.rounding(Int(old))),
                                                   to: .priority(newValue), now: self.currentState)
                    }
                    if drain { self.drainObservations() }
                }
            }
            self.owningQueue?.core.priorityChanged(self)
        }
    }

    /// The thread priority (0…1, clamped; default 0.5) applied to the thread running `main`, then restored.
    public final var threadPriority: Double {
        get { self.hasThreadPriority.load(ordering: .acquiring) ? self.withLocked { $0.more.threadPriority } : 0.5 }
        set {
            let value = SpindleThread.clampPriority(newValue)
            self.withLocked { $0.more.threadPriority = value }
            self.hasThreadPriority.store(true, ordering: .releasing)
        }
    }

    // MARK: - Completion block

    /// Runs exactly once after the operation finished (also when cancelled), on the finishing thread, outside
    /// every lock; `waitUntilFinished` and dependents wait for it to return. Reads nil once it has started. Setting
    /// one allocates the operation's side object (once), which keeps operations without one small.
    ///
    /// Final. Porting a `completionBlock` override that wraps the user's block: observe `.isFinished` instead
    /// (observers are told before the completion block runs, unless another thread is delivering this operation's
    /// changes at that moment: that thread then delivers `did isFinished` too, possibly while the block runs).
    public final var completionBlock: (@Sendable () -> Void)? {
        get { self.withLocked { $0.completionBlock } }
        set {
            // The old block is released after the lock: its captures' deinits are user code.
            let replaced = self.withLocked { l -> (@Sendable () -> Void)? in
                defer { l.completionBlock = newValue }
                return l.completionBlock
            }
            _ = replaced
        }
    }

    // MARK: - Running

    /// The work. Override it; the default does nothing. Thrown errors are kept in `error`; the operation finishes.
    /// Check `isCancelled` now and then to stop early.
    open func main() throws {}

    /// Called once, by `releaseWaiters`, when an operation that set `hasWaiters` before it could settle has
    /// settled: after its queue's bookkeeping, on the thread that did it, with no lock held. Nothing by default;
    /// `AsyncRunOperation` resumes its task here, so `run` returns only once the queue is done with it.
    func didSettle() {}

    /// Runs the operation on the calling thread: `main` once, then finishes. A cancelled operation finishes without
    /// running `main`. A finished one: nothing happens.
    ///
    /// - Throws: `operationExecuting` if it is already running, `operationNotReady` if a dependency has not
    ///   finished, `operationEnqueued` if a queue owns it (the queue starts it). Nothing changes then.
    open func start() throws {
        guard try self.enterExecution() else { return }
        self.runMainOnThisThread()
        self.completeExecution(error: nil)
    }

    /// The one finish path: executing (or cancelled and unstarted) → finishing → finished, then the observers, the
    /// owning queue's `didFinish` hook, the completion block, dependents, the owning queue and finally the waiters,
    /// in that order. Returns false (doing nothing) if
    /// another call got there first.
    @discardableResult
    final func completeExecution(error: (any Error)?) -> Bool {
        var current = self.currentState
        while true {
            guard let next = current.beginningFinish() else { return false }
            let (done, seen) = self.state.compareExchange(
                expected: current.raw, desired: next.raw, ordering: .acquiringAndReleasing)
            if done { break }
            current = OperationState(raw: seen)
        }
        // Only the winner reports: a losing finish() delivers nothing (so nothing can follow `did isFinished`).
        if self.hasObservers.load(ordering: .relaxed) { self.emitFinishing(wasExecuting: current.lifecycle == .executing) }
        // finishing → finished under the lock; take everything the rest of the path needs. Without a completion
        // block nothing runs between finishing and releasing the dependents, so they are taken here too (one lock
        // round trip fewer); otherwise only after the block returned.
        var dependents = InlineFirstList<Unmanaged<SpindleOperation>>()
        // An earlier error is let go first, outside the lock (a class error's deinit is user code): only the winner
        // above gets here, and nothing else sets the error of an operation past `executing`.
        if error != nil { self.replaceError(with: nil) }
        let (completion, queue, drain, failed, deadline) = self.withLocked {
            l -> ((@Sendable () -> Void)?, Unmanaged<SpindleOperationQueue>?, Bool, Bool, DeadlineEntry?) in
            if let error { l.error = error }
            let failedBit = l.extras?.error != nil ? OperationState.failedBit : 0
            var s = self.currentState
            while true {
                let (done, seen) = self.state.compareExchange(
                    expected: s.raw, desired: s.finished()!.raw | failedBit, ordering: .acquiringAndReleasing)
                if done { break }
                s = OperationState(raw: seen)
            }
            let deadline = l.extras?.deadlineEntry
            if deadline != nil { l.deadlineEntry = nil }
            // Appended under the same lock that made it finished: observers registered later get it from `observe`.
            let drain = l.recordDidFinish(now: self.currentState)
            let completion = l.takeCompletionBlock()
            if completion == nil {
                self.dependentsReleased = true
                dependents = l.takeDependents()
            }
            // A barrier is the queue's ordering device, not a piece of work: its being cancelled (a cancel-all) is
            // no failure to its dependents (`cancelsOnFailedDependency`).
            return (completion, l.queue.take(), drain, (failedBit != 0 || s.isCancelled) && !self.isBarrier, deadline)
        }
        if let deadline { DeadlineTimer.shared.remove(deadline) }
        if drain { self.drainOnOwnPath(of: queue?.takeUnretainedValue()) }
        if let queue { queue._withUnsafeGuaranteedRef { $0.core.tellHooksDidFinish(self) } }  // one load without hooks
        if let completion {
            // Dependents are released only now, after the completion block returned; a dependency added until
            // this point is still counted (see addDependency).
            dependents = self.runCompletionBlock(completion, of: queue)
        }
        // Its exclusivity categories go to the next in line before its dependents are told (a dependent in the same
        // category then finds it free, or its line behind those who came first).
        if current.isGated { self.releaseExclusivity() }
        if !dependents.isEmpty {
            // Finishing on the worker that ran it, which goes back to its queue's lock right after: the first
            // dependent that becomes ready in that queue is left for this worker (no other worker is woken for it,
            // and a spinning one is not told), so a chain runs on one thread instead of bouncing between cores.
            var selfServe = ThreadContext.withCurrent { $0.deferrable == Unmanaged.passUnretained(self).toOpaque() }
            dependents.forEach { dependent in
                let op = dependent.takeRetainedValue()  // retained by `takeDependents`
                if op.dependencyFinished(failed: failed, selfServe: selfServe) { selfServe = false }
            }
        }
        if let queue {
            let deferred = ThreadContext.withCurrent { context -> Bool in
                guard context.deferrable == Unmanaged.passUnretained(self).toOpaque() else { return false }
                // Finishing synchronously on the worker that started it: the worker does the queue's bookkeeping
                // together with taking its next operation, then calls `releaseWaiters`.
                context.deferrable = nil
                context.deferredFinish = true
                return true
            }
            if deferred { return true }
            queue._withUnsafeGuaranteedRef { $0.core.operationDidFinish(self) }
        }
        self.releaseWaiters()
        return true
    }

    /// The queue that owns it, from being added until it has finished; nil otherwise.
    final var owningQueue: SpindleOperationQueue? { self.withLocked { $0.queue?.takeUnretainedValue() } }

    // MARK: - Cancelling

    /// Asks it to stop: sets `isCancelled` (no effect once finishing or finished). Not-yet-started operations
    /// become ready at once and will finish without running `main`; a running `main` should notice and return.
    open func cancel() { self.markCancelled() }

    /// What `cancel()` does, beyond the reach of an override: the failed-dependency gate (`claimExecution`) falls
    /// back on it when an override did not call `super.cancel()`.
    final func markCancelled() {
        var current = self.currentState
        while true {
            guard let next = current.cancelling() else { return }
            let (done, seen) = self.state.compareExchange(
                expected: current.raw, desired: next.raw, ordering: .acquiringAndReleasing)
            if done {
                self.emitReadinessFlags()  // isCancelled, and isReady if this made it ready
                // It will never execute now: its exclusivity categories go to the next in line at once.
                if current.isGated && current.lifecycle < .executing { self.releaseExclusivity() }
                if !current.isReady { self.becameReady() }
                return
            }
            current = OperationState(raw: seen)
        }
    }

    /// Called when readiness went from false to true: tell observers, then the queue if one owns it. Returns
    /// whether the queue left it to the calling worker (see `QueueCore.scheduleReady`).
    @discardableResult
    final func becameReady(selfServe: Bool = false) -> Bool {
        self.emitReadinessFlags()
        return self.scheduleIfEnqueued(selfServe: selfServe)
    }

    /// If a queue owns it and it is ready, claims the "scheduled" bit (exactly once) and hands it to the queue.
    /// Returns whether the queue left it to the calling worker (`selfServe`, see `QueueCore.scheduleReady`).
    @discardableResult
    final func scheduleIfEnqueued(selfServe: Bool = false) -> Bool {
        var current = self.currentState
        while let next = current.scheduling() {
            let (done, seen) = self.state.compareExchange(
                expected: current.raw, desired: next.raw, ordering: .acquiringAndReleasing)
            if done {
                // nil: the queue already took it (admission pushes an operation whose bit was claimed while it was
                // being added) and it may even have finished; or a failed batch add gave it back. Nothing to do.
                if let queue = self.owningQueue { return queue.core.scheduleReady(self, selfServe: selfServe) }
                return false
            }
            current = OperationState(raw: seen)
        }
        return false
    }

    // MARK: - Running by hand (the seeds' performOperation:)

    /// Runs an operation by hand the way the seeds' `performOperation:` does: a ready, uncancelled operation is
    /// started on this thread if synchronous, or on a new detached thread if asynchronous; a cancelled one is
    /// finished unrun (a cancelled `SpindleGroupOperation` is started instead, on a detached thread, and finishes
    /// once its cancelled children have). Returns whether it was run (or finished); false, doing nothing, unless it was idle and ready
    /// (waiting for a dependency, in a queue, running or finished), if it could not be started, or if it has
    /// conditions or exclusivity categories (only a queue runs those).
    @discardableResult
    public static func perform(_ operation: SpindleOperation) -> Bool {
        let s = operation.currentState
        guard s.lifecycle == .idle, s.isReady else { return false }
        if s.isCancelled && !operation.isGroup {  // a group finishes after its children: started
            return operation.completeExecution(error: nil)
        }
        if s.isGated { return false }  // only a queue runs a gated operation (`gatedOperationNeedsQueue`)
        if !operation.isAsynchronous {
            do { try operation.start() } catch { return false }
            return true
        }
        do {
            try SpindleThread.detach(name: operation.name ?? "spindle-perform") { try? operation.start() }
        } catch {
            return false
        }
        return true
    }

    /// The operation whose `main` is running on the calling thread, if any.
    public static var current: SpindleOperation? { ThreadContext.current.operation }
}
