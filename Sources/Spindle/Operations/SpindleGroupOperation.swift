/// An operation whose work is a set of child operations, run on its own inner queue: it finishes when every child
/// has finished (the `GroupOperation` of Apple's "Advanced NSOperations" sample and PSOperations, ProcedureKit's
/// `GroupProcedure`).
///
/// ```swift
/// let group = try SpindleGroupOperation(operations: [download, parse], maxConcurrentOperationCount: 2)
/// try group.addOperation(index)            // before it starts, or while it runs (from a child too)
/// try queue.addOperation(group)
/// try group.waitUntilFinished()            // then: group.childErrors, group.error
/// ```
///
/// - Running: children wait in the group's inner queue (width `maxConcurrentOperationCount`, default the CPU
///   count), suspended until the group starts. `start()` resumes it and returns at once: in a queue the group
///   holds one slot, and no thread, until it finishes. It finishes by itself once every child has finished — the
///   child's completion block returned, its waiters released — on the thread that finished the last child.
///   Children may have dependencies between them or on operations elsewhere; the group waits for them all.
/// - Adding: `addOperation` / `addOperations` before it starts or while it runs (from a child's `main`, from
///   `childDidFinish`, or with `produce(_:)` from a child); a child added while the last one is finishing is
///   either counted, and the group waits for it, or refused with `groupFinished`. Never lost, never run after.
/// - Cancelling: `cancel()` cancels every child (waiting ones finish without running `main`, running ones see
///   `isCancelled`); no child begins `main` uncancelled after it returned. A child added afterwards is cancelled
///   and finished unrun at once, on the adding thread (its completion block runs there). A group cancelled before
///   it started never executes: once its children (all cancelled) are through, it finishes unrun when started.
/// - Errors: each child's `error` is kept, in the order the children finished (`childErrors`); if any failed, the
///   group finishes with `SpindleError.childrenFailed` carrying them (so `hasFailed`, failure propagation and
///   `cancelsOnFailedDependency` see it). A cancelled child without an error is no failure.
/// - Waiting: `waitUntilFinished` works from outside; from inside — the `main` or completion block of an operation
///   in the group, at any depth — it throws `waitOnOwnGroup` (the group waits for that operation).
/// - Threads: by default the children run on `SpindleThreadPool.shared` (the group owns no threads); with
///   `pool: nil` its inner queue has threads of its own.
/// - Lifetime: a started group keeps itself alive until it finishes. When it finishes, its inner queue is shut down
///   (threads of its own leave their loops); they are joined when the group is released. A group released before it
///   started cancels the children it holds (they finish unrun, completion blocks run).
/// - Don't: call `finish()` on it (it throws `groupFinishesByItself`), or add follow-ups through
///   `SpindleOperationQueue.current` from a child (that is the inner queue: the group would not wait for them).
///
/// Guards: `lock` (an `InlineLock`) protects `count`, `errors`, `cancelRequested` and `keepAlive`. It is a leaf:
/// nothing else is locked while it is held, it is never taken under another lock of ours, and no user code runs
/// under it. `inner` is set once in `init` (a queue is thread-safe).
///
/// State machine (`count`, a `GroupChildCount`: pure transitions, tested as a table): `gathering` (not started;
/// `pending` grows with adds) → `running` (`start()`, or the start of a group cancelled before it ran) → `sealed`
/// (when `pending` reaches zero while running: at `start()` with no children, when the last child's finish path is
/// complete, or when a failed add uncounts the last child). `pending` counts each child from the moment its add
/// begins until its finish path is complete (or its add failed), so an add in flight holds the group open; the
/// one caller whose release seals the count finishes the group, exactly once. Once sealed, adds are refused.
///
/// Why a count with a sealed state rather than the sample's finishing operation (which depends on every child):
/// adding a child while that finishing operation is becoming ready races (the dependency can arrive after it was
/// found ready, and the child then runs after the group finished), and its dependency list keeps every child alive
/// until the group ends. Counting under one lock makes "admit" and "seal" mutually exclusive, keeps nothing but the
/// errors, and costs O(1) per child.
open class SpindleGroupOperation: SpindleOperation, @unchecked Sendable {
    /// The children's queue: suspended until the group starts, shut down when it finishes (`.drain`) or is
    /// cancelled (`.cancel`), released (its threads joined) with the group.
    let inner: SpindleOperationQueue
    private let lock = InlineLock()
    private var count = GroupChildCount()  // under `lock`
    private var errors: [any Error] = []  // under `lock`
    private var cancelRequested = false  // under `lock`: set by the first `cancel()` that took effect
    private var keepAlive: SpindleGroupOperation? = nil  // under `lock`: self, from start until it finishes
    /// Under `lock`: gated children added before the start, whose gates open at the start (`deferGateUntilStart`).
    private var gatesAwaitingStart: [SpindleOperation] = []
    /// Under `DependencyGraph.lock`: children linked to this group and not yet handed to the inner queue (the cycle
    /// search sees a group's children through `linkedChildren`: those in the inner queue and these).
    private var handingOver: [SpindleOperation] = []

    /// A group holding `operations`, whose inner queue runs at most `maxConcurrentOperationCount` of them at once
    /// (default: the CPUs this process may use), on `pool`'s threads (default `SpindleThreadPool.shared`: groups
    /// share threads, so many groups cost no threads of their own; nil gives the inner queue threads of its own,
    /// one per slot, for children that block outside Spindle's waits). Any thread.
    ///
    /// - Throws: `invalidConcurrencyLimit` for a negative width other than the default sentinel; for an operation
    ///   that cannot be added, as `addOperations`. Nothing is made then.
    public init(operations: [SpindleOperation] = [],
                maxConcurrentOperationCount: Int = SpindleOperationQueue.defaultMaxConcurrentOperationCount,
                pool: SpindleThreadPool? = .shared)
        throws(SpindleError)
    {
        if let pool {
            self.inner = try SpindleOperationQueue(maxConcurrentOperationCount: maxConcurrentOperationCount, pool: pool)
        } else {
            self.inner = try SpindleOperationQueue(maxConcurrentOperationCount: maxConcurrentOperationCount)
        }
        self.inner.isSuspended = true
        super.init()
        self.inner.name = "\(self.defaultName) children"
        try self.addOperations(operations)
    }

    deinit {
        // Never started (a started group keeps itself alive until it finished): its children finish cancelled.
        self.inner.shutdown(.cancel)
    }

    @inline(__always)
    private func withLock<R>(_ body: () -> R) -> R {
        self.lock.lock()
        defer { self.lock.unlock() }
        return body()
    }

    // MARK: - Children

    /// Adds a child: it runs on the group's inner queue once the group has started (and it is ready), and the
    /// group does not finish before it has. Callable before the group starts and while it runs, from any thread
    /// (a child's `main` included). A child added after the group was cancelled is cancelled and finished unrun,
    /// on the calling thread.
    ///
    /// - Throws: `groupFinished` once the group has finished (or is finishing); `groupCycle` if `operation` is this
    ///   group or one it is inside; `dependencyCycle` if it waits (directly or not) for this group or one this group
    ///   is inside; as `SpindleOperationQueue.addOperation` for an operation that is in a queue or
    ///   a group already, executing, or finished. Nothing changes then.
    public final func addOperation(_ operation: SpindleOperation) throws(SpindleError) {
        try self.addChildren([operation])
    }

    /// Adds several children, all or none (see `addOperation`).
    /// - Throws: as `addOperation`, and `duplicateInBatch` for an operation listed twice. Nothing is added then.
    public final func addOperations(_ operations: [SpindleOperation]) throws(SpindleError) {
        try self.addChildren(operations)
    }

    private func addChildren(_ children: [SpindleOperation]) throws(SpindleError) {
        // 1. Misuse found without counting: the same operation twice. (Cycles are checked with the links, step 3.)
        if children.count > 1 {
            var seen = Set<ObjectIdentifier>()
            for child in children where !seen.insert(ObjectIdentifier(child)).inserted {
                throw .duplicateInBatch(name: child.displayName)
            }
        }
        // 2. Count them (refused once sealed): from here the group cannot finish before they are through.
        let (admitted, cancelled) = self.withLock { (self.count.admit(children.count), self.cancelRequested) }
        guard admitted else { throw .groupFinished(name: self.displayName) }
        // 3. Link each to this group (its finish path will tell us), then hand them all to the inner queue; into a
        //    cancelled group, finish them unrun instead (its inner queue is shut down: it takes nothing more).
        var linked = 0
        var failure: SpindleError? = nil
        var listedForHandOver = false  // in `handingOver` until the inner queue's add returned
        var reached: [SpindleOperation] = []  // what the cycle checks reached: released after unlocking
        defer { withExtendedLifetime(reached) {} }
        // Under the dependency graph's lock, so that no `addDependency` racing these links can close a cycle that
        // neither check sees: a child that waits (directly or not) for this group, or a group it is inside, would
        // never finish.
        DependencyGraph.lock.withLock {
            let groups = [self as SpindleOperation] + self.enclosingGroups
            reached += groups
            for child in children {
                // A group containing this one (or itself): checked with the links made, so two groups added to
                // each other at once cannot both pass.
                if let group = child as? SpindleGroupOperation, groups.contains(where: { $0 === group }) {
                    failure = .groupCycle(group: self.displayName, child: child.displayName)
                    break
                }
                if let path = self.pathOfUnfinishedDependencies(from: child, to: groups, reached: &reached) {
                    failure = .dependencyCycle(cycle: Self.describeCycle(path, closingOn: child))
                    break
                }
                if let error = child.joinGroup(self) {
                    failure = error
                    break
                }
                linked += 1
            }
            if failure == nil && !cancelled {
                self.handingOver.append(contentsOf: children)
                listedForHandOver = true
            }
        }
        defer {
            if listedForHandOver {  // handed over now (or refused): the inner queue's members show them, or nothing
                DependencyGraph.lock.withLock {
                    if children.count == 1 {
                        self.handingOver.removeAll { $0 === children[0] }
                    } else {
                        let handed = Set(children.lazy.map(ObjectIdentifier.init))
                        self.handingOver.removeAll { handed.contains(ObjectIdentifier($0)) }
                    }
                }
            }
        }
        if failure == nil && cancelled {
            self.finishUnrun(children)
            return
        }
        if failure == nil {
            do {
                if children.count == 1 {
                    try self.inner.addOperation(children[0])
                } else {
                    try self.inner.addOperations(children)
                }
            } catch {
                // A `cancel()` since step 2 shut the inner queue (nothing else does while children are counted):
                // nothing was added; they are finished here, as if they had come after the cancel.
                if case .queueShutDown = error, self.withLock({ self.cancelRequested }) {
                    self.finishUnrun(children)
                    return
                }
                failure = error
            }
        }
        if let failure {
            // 4. Undo: uncount each child never linked or whose link we took back. (One whose finish path took its
            //    link meanwhile — run elsewhere by a racing misuse — was uncounted by that path.)
            var uncount = children.count - linked
            for child in children[..<linked] where child.leaveGroup(self) { uncount += 1 }
            if self.withLock({ self.count.release(uncount) }) { self.finishGroup() }
            throw failure
        }
        // Added: a later `cancel()` cancels them with the inner queue's other members, or a worker of that queue
        // (shut down with `.cancel`) cancels them before it starts them.
    }

    /// Children added to a cancelled group, linked and counted: cancelled, then finished unrun on this thread (a
    /// nested group is started instead, which finishes it once its own children are through). Each tells this
    /// group through its link, as any child does. One another thread managed to put in a queue meanwhile (a racing
    /// misuse) is finished by that queue instead, and tells this group the same way.
    private func finishUnrun(_ children: [SpindleOperation]) {
        for child in children {
            child.cancel()
            if child is SpindleGroupOperation {
                try? child.start()
            } else {
                child.completeExecution(error: nil)
            }
        }
    }

    /// Called once for each child, after its finish path is complete (completion block returned, waiters released),
    /// on the thread that finished it, outside every lock, before the group stops counting it: so adding children
    /// from here (follow-ups to this one) always succeeds, even after the last child. Override it to react to each
    /// child (the sample's `operationDidFinish(_:withErrors:)`); the default does nothing. Waiting for the group
    /// from here throws `waitOnSelf`.
    open func childDidFinish(_ child: SpindleOperation) {}

    /// The errors of the children that failed, in the order they finished. Any thread.
    public final var childErrors: [any Error] { self.withLock { self.errors } }

    /// The children linked to this group and not finished, for the cycle search (a group's end waits for theirs):
    /// the inner queue's members, and those being handed to it. Caller holds `DependencyGraph.lock`.
    final var linkedChildren: [SpindleOperation] { self.inner.operations + self.handingOver }

    /// A gated child's add, before its gate opens: while the group has not started, the child's gate waits for the
    /// start (returns true; `start()` opens it); otherwise returns false and the child opens it now. Any thread.
    final func deferGateUntilStart(_ child: SpindleOperation) -> Bool {
        self.withLock {
            guard self.count.phase == .gathering else { return false }
            self.gatesAwaitingStart.append(child)
            return true
        }
    }

    /// Children added (or being added) and not yet finished. Any thread; a snapshot.
    public final var unfinishedChildCount: Int { self.withLock { self.count.pending } }

    // MARK: - The inner queue's width

    /// How many children may run at once (`SpindleOperationQueue.defaultMaxConcurrentOperationCount`, -1: the CPU
    /// count). Any thread.
    public final var maxConcurrentOperationCount: Int { self.inner.maxConcurrentOperationCount }

    /// Changes how many children may run at once; takes effect at once, also while the group runs. 0 starts no
    /// child (the group then cannot finish until it is raised).
    /// - Throws: `invalidConcurrencyLimit` for a negative value other than -1; nothing changes then.
    public final func setMaxConcurrentOperationCount(_ value: Int) throws(SpindleError) {
        try self.inner.setMaxConcurrentOperationCount(value)
    }

    // MARK: - Running

    /// Always true: the group's work ends when its last child has finished, after `start()` returned. Any thread.
    public final override var isAsynchronous: Bool { true }

    /// True: a group (a table lookup where a type check would cost a cast on plain operations' paths).
    final override var isGroup: Bool { true }

    /// A group has no `main` of its own: its work is its children. Not called.
    public final override func main() throws {}

    /// Starts the children (resumes the inner queue) and returns at once; the group finishes when the last child
    /// has. With no children it finishes here. A group cancelled before it started finishes unrun once its
    /// (cancelled) children are through. A finished group: nothing happens.
    /// - Throws: as `SpindleOperation.start()` (`operationExecuting`, `operationNotReady`, `operationEnqueued`).
    ///   Nothing changes then.
    public final override func start() throws {
        if try self.claimExecution() == .finished { return }
        // Claimed (executing), or cancelled before it ran: either way the children must drain before it finishes.
        let (outcome, gates) = self.withLock { () -> (GroupChildCount.Start, [SpindleOperation]) in
            let outcome = self.count.start()
            guard case .started = outcome else { return (outcome, []) }
            self.keepAlive = self
            defer { self.gatesAwaitingStart = [] }
            return (outcome, self.gatesAwaitingStart)
        }
        switch outcome {
        case .started(sealed: true):
            self.finishGroup()
        case .started(sealed: false):
            self.inner.isSuspended = false
            for child in gates { child.gateGroupStarted() }  // their categories and conditions, now
        case .alreadyStarted(sealed: let sealed):
            // Only a group cancelled before it ran, started again (by hand, or by a queue it was added to after a
            // start by hand): its children drain or have drained. If they have, the seal's own finish may have
            // found it in that queue (enqueued, not finishable): finish it here.
            if sealed { self.completeExecution(error: self.aggregateError()) }
        }
    }

    /// Marks the group cancelled and cancels every child, waiting or running: no child begins `main` uncancelled
    /// after this returns, and children added later are finished unrun as they are added. No effect once it is
    /// finishing or finished. Any thread.
    public final override func cancel() {
        super.cancel()
        guard self.isCancelled else { return }
        self.withLock { self.cancelRequested = true }
        // The inner queue's cancelling shutdown (outside our lock: a child's cancel() may be user code): it cancels
        // the members, and from its first step on its workers cancel whatever they take before starting it; adds
        // are refused from then on (`addChildren` finishes those children itself). A group that has not started
        // yet: its queue is resumed, so its children finish now; the group itself finishes when it is started.
        // Every call makes it, not only the first: a second `cancel()` racing the first must not return before
        // that step (the queue's lock orders them; a later call finds it done and changes nothing).
        self.inner.shutdown(.cancel)
    }

    // MARK: - Finishing

    /// A child's finish path is complete (`releaseWaiters`, which took its link): tells `childDidFinish`, records
    /// its error and uncounts it; the call that seals the count finishes the group.
    final func childDidSettle(_ child: SpindleOperation) {
        let context = ThreadContext.current
        let outer = context.completing
        context.completing = self  // a wait for this group from the hook would wait for itself
        self.childDidFinish(child)
        context.completing = outer
        let error = child.error
        let sealed = self.withLock { () -> Bool in
            if let error { self.errors.append(error) }
            return self.count.release(1)
        }
        if sealed { self.finishGroup() }
    }

    /// The count sealed (called once, by the caller that sealed it): shut the inner queue down (it is empty; its
    /// threads leave their loops) and finish the group with the children's errors. The group stays alive until
    /// its finish path is done.
    private func finishGroup() {
        let keep = self.withLock { () -> SpindleGroupOperation? in
            defer { self.keepAlive = nil }
            return self.keepAlive
        }
        self.inner.shutdown(.drain)
        self.completeExecution(error: self.aggregateError())
        withExtendedLifetime(keep) {}
    }

    /// `childrenFailed` with the children's errors, or nil if none failed.
    private func aggregateError() -> (any Error)? {
        let errors = self.childErrors
        return errors.isEmpty ? nil : SpindleError.childrenFailed(name: self.displayName, errors: errors)
    }
}
