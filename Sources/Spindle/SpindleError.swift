/// Every error Spindle throws: misuse of the API, and the few runtime conditions a caller must handle.
///
/// Misuse never changes anything: the call that throws leaves every object as it was (Part 1, item 1 of the
/// contract). Each case's `description` names the misuse in one sentence.
public enum SpindleError: Error, CustomStringConvertible, Sendable {
    // MARK: Primitives and threads
    /// A semaphore was created with a negative value.
    case negativeSemaphoreValue(Int)
    /// A timeout or deadline that is not a number (NaN).
    case invalidTimeout
    /// `join()` on a thread that was already joined.
    case threadAlreadyJoined(name: String)
    /// `join()` on a thread that is not joinable: detached, the main thread, or one Spindle did not spawn.
    case threadNotJoinable(name: String)
    /// `join()` called by the thread on itself (also `SpindleRunLoopThread.shutdown` on the loop's own thread).
    case joinSelf(name: String)
    /// `join()` that would wait for ever: the thread to join is itself waiting, through a chain of `join()`s, for
    /// the calling thread. `threads` is the chain, from the calling thread to the one it asked to join and on
    /// back to the calling thread.
    case joinCycle(threads: [String])
    /// `start()` or `startJoinable()` on a thread that was already started (or is being started), or on one that
    /// was running from the start (`main`, `current`, the result of `detach` or `spawnJoinable`).
    case threadAlreadyStarted(name: String)
    /// `join()` on a thread that has not been started (or whose start has not returned yet).
    case threadNotStarted(name: String)
    /// `setStackSize(_:)` on a thread that was started: its stack is fixed when it starts.
    case threadStackSizeFixed(name: String)
    /// A libc or pthread call failed with this error number.
    case system(function: String, errno: Int32)

    // MARK: Operations
    /// `start()` on an operation that is executing (or being started by someone else), or adding one to a queue.
    case operationExecuting(name: String)
    /// `start()` on an operation whose dependencies have not all finished.
    case operationNotReady(name: String)
    /// `start()` by hand on an operation that a queue owns.
    case operationEnqueued(name: String)
    /// Reporting the end of an operation that already finished.
    case operationAlreadyFinished(name: String)
    /// Reporting the end of an operation that is not executing: it never started and was not cancelled, or it
    /// was cancelled while waiting in a queue (the queue finishes it).
    case operationNotExecuting(name: String)
    /// `addExecutionBlock` on a block operation that has started.
    case blockOperationStarted(name: String)
    /// An operation made to depend on itself.
    case selfDependency(name: String)
    /// A dependency that would close a cycle; `cycle` lists the operations' names along it.
    case dependencyCycle(cycle: [String])
    /// `addDependency` on a barrier (the operation `addBarrierBlock` returned): its place in its queue decides when
    /// it runs, so it takes no dependencies. Make it wait by adding the dependency's work before it, or wait
    /// before adding it.
    case barrierTakesNoDependencies(name: String)
    /// `waitUntilFinished` called from the operation's own `main` or completion block (the async wait: from its
    /// own async body).
    case waitOnSelf(name: String)
    /// Reading the result of an operation that was cancelled.
    case resultOfCancelledOperation(name: String)
    /// Reading the result of an operation that has not finished.
    case resultNotReady(name: String)
    /// Reading the result of an operation whose method returns nothing.
    case voidResult(name: String)
    /// The operation's `main` threw; the error is carried.
    case operationFailed(name: String, underlying: any Error)
    /// A `SpindleRetryOperation` made with fewer than one attempt.
    case invalidAttemptCount(Int)
    /// An attempt of the `SpindleRetryOperation` named `name` ended cancelled on its own (its deadline, say):
    /// that attempt's error, in `attemptErrors` (and the retry's `error` if it was the last).
    case attemptCancelled(name: String, attempt: Int)

    // MARK: Queues
    /// Adding an operation that is already in a queue (this one or another).
    case operationAlreadyInQueue(name: String)
    /// Adding an operation that has finished.
    case operationFinished(name: String)
    /// `maxConcurrentOperationCount` set to a negative value other than the default sentinel.
    case invalidConcurrencyLimit(Int)
    /// Waiting for a queue from one of that queue's own operations: for it to drain or terminate, for a batch
    /// added with `waitUntilFinished` when no slot could be left to run it, or for room in it (policy `.block`).
    case waitOnOwnQueue(name: String)
    /// A batch add with the same operation twice.
    case duplicateInBatch(name: String)
    /// A bounded queue had no room: its policy is to refuse (`SpindleFullQueuePolicy.reject`), its policy is
    /// `.callerRuns` but the batch cannot run on the calling thread, or a timed add's deadline passed before room
    /// appeared. Nothing was added.
    case queueFull(name: String, capacity: Int)
    /// A batch with more operations than the queue's capacity: it could never fit. Nothing was added.
    case batchExceedsCapacity(name: String, count: Int, capacity: Int)
    /// A queue capacity below 1.
    case invalidCapacity(Int)
    /// Using, in a process made by `fork()`, a queue (or a `SpindleRunLoopThread`) made before the fork: its threads
    /// stayed in the parent, so it takes no work and waits for nothing here. Make a new one in the child.
    case forkedChild(name: String)

    /// Adding work to a queue after its `shutdown` began: nothing was added, and the operation is as it was (it can
    /// be run elsewhere).
    case queueShutDown(name: String)

    // MARK: Run loops (cases used by Sources/Spindle/RunLoop)
    /// Sending to, or scheduling, a port that was invalidated.
    case portInvalidated(name: String)
    /// Running a run loop from a thread that does not own it.
    case runLoopNotOwned
    /// A timer interval that is NaN, infinite or negative.
    case invalidTimerInterval(Double)
    /// Watching a descriptor that is not open (or negative).
    case invalidDescriptor(Int32)
    /// Adding a port, timer or descriptor source to a run loop while it is scheduled on another live run loop.
    case scheduledOnAnotherRunLoop(name: String)
    /// Adding a port, timer or descriptor source to a run loop whose thread has exited (a `SpindleRunLoopThread`
    /// after `shutdown`, or a loop kept after its thread ended): nothing would ever serve it. Nothing changed.
    case runLoopExited
    /// Adding a descriptor source to a run loop that already watches as many descriptors as one poll(2) may
    /// (`limit`, the process's RLIMIT_NOFILE soft limit, its own wakeup descriptor included). Nothing changed.
    case tooManyDescriptorSources(limit: Int)

    // MARK: Wait groups (cases used by Sources/Spindle/Primitives/SpindleWaitGroup.swift)
    /// `leave()` on a wait group with no matching `enter()` (`DispatchGroup` traps here): nothing changed.
    case waitGroupUnbalanced(name: String)

    // MARK: Groups and produced operations (issue 19)
    /// Adding a child to a `SpindleGroupOperation` that has finished or is finishing (its last child finished after
    /// it started): nothing was added.
    case groupFinished(name: String)
    /// Adding a group operation to itself, or to a group that it contains (at any depth): it would wait for itself.
    case groupCycle(group: String, child: String)
    /// `waitUntilFinished` on a group from inside it: from the `main` or completion block of an operation the group
    /// contains (at any depth), which the group waits for.
    case waitOnOwnGroup(name: String)
    /// `finish()` called on a `SpindleGroupOperation`: a group finishes by itself, when its last child has.
    case groupFinishesByItself(name: String)
    /// The group named `name` finished with children that failed: their errors, in the order they finished (also
    /// in `SpindleGroupOperation.childErrors`).
    case childrenFailed(name: String, errors: [any Error])
    /// `produce(_:)` called on an operation that is not executing (not started yet, or finished).
    case produceWhenNotExecuting(name: String)
    /// `produce(_:)` called on an operation that runs in no queue and no group: there is nowhere to add what it
    /// produces.
    case produceWithoutQueue(name: String)

    // MARK: Conditions and exclusivity (issue 19)
    /// A condition of the operation `operation` failed: the condition named `condition` returned `.failed` with
    /// `underlying`, or the dependency it produced could not be added (`underlying` says why). The operation
    /// finished unrun; this is its `error`.
    case conditionFailed(operation: String, condition: String, underlying: any Error)
    /// `addCondition` or `addExclusivityCategory` on an operation that was already added to a queue, started or
    /// finished.
    case conditionAddedTooLate(name: String)
    /// `start()` by hand on an operation with conditions or exclusivity categories that is not cancelled: only a
    /// queue runs it (its conditions' dependencies need a queue, and a busy category is waited for in line).
    case gatedOperationNeedsQueue(name: String)
    /// The operation `operation` needs the exclusivity category `category`, which the group `group` it is inside
    /// holds until its last child finished: it could never run. It finished unrun; this is the `underlying` error
    /// of its `conditionFailed`.
    case categoryHeldByEnclosingGroup(operation: String, category: String, group: String)
    /// A thread pool needs at least one thread, and at most `SpindleThreadPool.maximumThreadCount`.
    case invalidThreadCount(Int)

    /// A sentence naming the misuse or failure and the object involved (by name). Any thread; throws nothing.
    public var description: String {
        switch self {
        case .negativeSemaphoreValue(let v): return "a semaphore cannot start with a negative value (\(v))"
        case .invalidTimeout: return "a timeout must be a number (NaN was given)"
        case .threadAlreadyJoined(let n): return "thread '\(n)' was already joined"
        case .threadNotJoinable(let n): return "thread '\(n)' is detached and cannot be joined"
        case .joinSelf(let n): return "thread '\(n)' cannot join itself"
        case .joinCycle(let t): return "join would wait for ever: \(t.joined(separator: " joins "))"
        case .threadAlreadyStarted(let n): return "thread '\(n)' was already started; a thread starts once"
        case .threadNotStarted(let n): return "thread '\(n)' has not been started; there is nothing to join"
        case .threadStackSizeFixed(let n): return "thread '\(n)' was started; its stack size can no longer change"
        case .system(let f, let e): return "\(f) failed with error \(e)"
        case .operationExecuting(let n): return "operation '\(n)' is already executing"
        case .operationNotReady(let n): return "operation '\(n)' is not ready: a dependency has not finished"
        case .operationEnqueued(let n): return "operation '\(n)' belongs to a queue; the queue starts it"
        case .operationAlreadyFinished(let n): return "operation '\(n)' already reported its end"
        case .operationNotExecuting(let n): return "operation '\(n)' cannot finish: it is not executing"
        case .blockOperationStarted(let n): return "block operation '\(n)' has started; no more blocks can be added"
        case .selfDependency(let n): return "operation '\(n)' cannot depend on itself"
        case .dependencyCycle(let c): return "dependency would close a cycle: \(c.joined(separator: " -> "))"
        case .barrierTakesNoDependencies(let n):
            return "operation '\(n)' is a barrier: its place in its queue decides when it runs; it takes no "
                + "dependencies"
        case .waitOnSelf(let n): return "operation '\(n)' cannot wait for itself to finish"
        case .resultOfCancelledOperation(let n): return "operation '\(n)' was cancelled and has no result"
        case .resultNotReady(let n): return "operation '\(n)' has not finished; its result is not ready"
        case .voidResult(let n): return "operation '\(n)' returns nothing; it has no result to read"
        case .operationFailed(let n, let e): return "operation '\(n)' failed: \(e)"
        case .invalidAttemptCount(let v): return "a retry needs at least 1 attempt (\(v) was given)"
        case .attemptCancelled(let n, let a): return "attempt \(a) of retry '\(n)' was cancelled"
        case .operationAlreadyInQueue(let n): return "operation '\(n)' is already in a queue"
        case .operationFinished(let n): return "operation '\(n)' has finished and cannot be added to a queue"
        case .invalidConcurrencyLimit(let v):
            return "maxConcurrentOperationCount must be >= 0 or the default sentinel (\(v) was given)"
        case .waitOnOwnQueue(let n): return "an operation of queue '\(n)' cannot wait for that queue to drain"
        case .forkedChild(let n):
            return "'\(n)' was made before fork(): its threads are in the parent, so it takes no work in the child"
        case .queueShutDown(let n): return "queue '\(n)' is shut down: it accepts no new work; nothing was added"
        case .duplicateInBatch(let n): return "operation '\(n)' appears twice in one batch"
        case .queueFull(let n, let c): return "queue '\(n)' is full (capacity \(c)); nothing was added"
        case .batchExceedsCapacity(let n, let count, let c):
            return "a batch of \(count) operations can never fit in queue '\(n)' (capacity \(c))"
        case .invalidCapacity(let v): return "a queue capacity must be at least 1 (\(v) was given)"
        case .portInvalidated(let n): return "port '\(n)' was invalidated"
        case .runLoopNotOwned: return "a run loop can only be run by the thread that owns it"
        case .invalidTimerInterval(let v): return "a timer interval must be a finite number >= 0 (\(v) was given)"
        case .invalidDescriptor(let fd): return "descriptor \(fd) is not open"
        case .scheduledOnAnotherRunLoop(let n): return "'\(n)' is already scheduled on another run loop"
        case .runLoopExited: return "the run loop's thread has exited: nothing added to it would be served"
        case .tooManyDescriptorSources(let l):
            return "a run loop watches at most \(l) descriptors in one poll (RLIMIT_NOFILE, its own wakeup included)"
        case .waitGroupUnbalanced(let n):
            return "wait group '\(n)': leave() without a matching enter(); nothing changed"
        case .groupFinished(let n): return "group '\(n)' has finished; no more children can be added"
        case .groupCycle(let g, let c): return "group '\(c)' cannot be added to group '\(g)', which it is or contains"
        case .waitOnOwnGroup(let n): return "an operation inside group '\(n)' cannot wait for that group to finish"
        case .groupFinishesByItself(let n): return "group '\(n)' finishes by itself, when its last child has"
        case .childrenFailed(let n, let e):
            return "\(e.count) child(ren) of group '\(n)' failed: \(e.map { "\($0)" }.joined(separator: "; "))"
        case .produceWhenNotExecuting(let n): return "operation '\(n)' is not executing; it cannot produce operations"
        case .produceWithoutQueue(let n):
            return "operation '\(n)' runs in no queue and no group; there is nowhere to add what it produces"
        case .conditionFailed(let n, let c, let e): return "operation '\(n)' did not run: its condition '\(c)' failed: \(e)"
        case .conditionAddedTooLate(let n):
            return "operation '\(n)' was already added to a queue or started: its conditions and categories are fixed"
        case .gatedOperationNeedsQueue(let n):
            return "operation '\(n)' has conditions or exclusivity categories: only a queue can start it"
        case .categoryHeldByEnclosingGroup(let n, let c, let g):
            return "operation '\(n)' needs exclusivity category '\(c)', which group '\(g)' it is inside holds until "
                + "its children finished"
        case .invalidThreadCount(let v):
            return "a thread pool needs at least 1 thread and at most \(SpindleThreadPool.maximumThreadCount) (\(v) was given)"
        }
    }
}
