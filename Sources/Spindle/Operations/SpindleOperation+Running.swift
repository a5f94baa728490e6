/// Running an operation on the calling thread: the queue's start of a plain block operation, `main` with the
/// current-operation marker and thread priority set, and the claim that moves it into `executing`. Final helpers
/// of `start()` (which stays in the class body, as subclasses override it).
extension SpindleOperation {
    /// A queue worker's start of a plain `SpindleBlockOperation` (its exact class: `start()` is this class's, so it
    /// cannot hop to another thread): as `start()`, but only this call claims it, so a `start()` from another thread
    /// racing the worker is refused (`operationEnqueued`) instead of running it beside the worker's batch.
    final func startAsItsQueue() throws(SpindleError) {
        guard try self.enterExecution(byItsQueue: true) else { return }
        self.runMainOnThisThread()
        self.completeExecution(error: nil)
    }

    /// The default `start` path, minus the final `completeExecution`: runs `main` with the thread priority and the
    /// current-operation marker set, and records a thrown error.
    final func runMainOnThisThread() {
        ThreadContext.withCurrent { self.runMain(in: $0) }
    }

    private func runMain(in context: ThreadContext) {
        self.runAsCurrent(in: context) {
            do {
                try self.main()
            } catch {
                self.replaceError(with: error)
            }
        }
    }

    /// Runs `body` on this thread as this operation's work (its `main`, or a block operation's blocks on a helper
    /// thread): `SpindleOperation.current` and the self-wait checks see it, and the thread runs at its thread
    /// priority; both are put back afterwards.
    @inline(__always)
    final func runAsCurrent(in context: ThreadContext, _ body: () -> Void) {
        let previous = context.operationRef
        if let previous { context.outerOperations.append(previous) }  // started inside another's `main`
        context.operationRef = Unmanaged.passUnretained(self)
        // One atomic load on the operation and one on the thread in the common case (both 0.5): no syscall, no
        // lock, no reference counting.
        let wanted = self.hasThreadPriority.load(ordering: .relaxed) ? self.threadPriority : 0.5
        let current = context.threadPriority
        var restore: Double? = nil
        if current != wanted {
            restore = current
            context.thread.setPriority(wanted)
        }
        body()
        if let restore { context.thread.setPriority(restore) }
        context.operationRef = previous
        if previous != nil { context.outerOperations.removeLast() }
    }

    /// Moves into `executing` (emitting the isExecuting change) and returns true; or, if cancelled before it ran,
    /// finishes it unrun and returns false; or returns false if already finished.
    /// - Throws: as `start()`.
    @inline(__always)
    final func enterExecution(byItsQueue: Bool = false) throws(SpindleError) -> Bool {
        switch try self.claimExecution(byItsQueue: byItsQueue) {
        case .claimed: return true
        case .cancelled:
            self.completeExecution(error: nil)
            return false
        case .finished: return false
        }
    }

    // The finish path's parts for observed operations and completion blocks: out of line, so that the path of an
    // operation with neither stays small (the compiler then keeps its locked step inline).

    /// Tells observers it is no longer executing and will finish, on its finish path: the thread is marked as its
    /// completer, so a wait for it there is told (`waitOnSelf`) instead of waiting for itself.
    @inline(never)
    final func emitFinishing(wasExecuting: Bool) {
        ThreadContext.current.asCompleting(self, of: self.owningQueue) {
            if wasExecuting { self.emitFlag(.isExecuting, to: false) }
            self.emitFlag(.isFinished, to: true, did: false)
        }
    }

    /// Delivers what its start or finish path recorded (`did isExecuting`, `did isFinished`), the thread marked as
    /// above: a wait there for it, or for `queue`, would wait for itself.
    @inline(never)
    final func drainOnOwnPath(of queue: SpindleOperationQueue?) {
        ThreadContext.current.asCompleting(self, of: queue) { self.drainObservations() }
    }

    /// Runs its completion block with the thread marked (a block that waits for its own operation, or its queue, is
    /// told instead of deadlocking), then takes its dependents to release.
    @inline(never)
    final func runCompletionBlock(_ completion: @Sendable () -> Void, of queue: Unmanaged<SpindleOperationQueue>?)
        -> InlineFirstList<Unmanaged<SpindleOperation>>
    {
        ThreadContext.current.asCompleting(self, of: queue?.takeUnretainedValue(), completion)
        return self.withLocked { l in
            self.dependentsReleased = true
            return l.takeDependents()
        }
    }
}
