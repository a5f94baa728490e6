import CShim
import Glibc

// NSThread's life for `SpindleThread`: made unstarted with a block or a body (or as a subclass overriding `main()`),
// configured, started once, cancelled cooperatively; and the two conveniences that make and start one at once.
// The states, their guards and the lock order are in the type's header (SpindleThread.swift).
extension SpindleThread {
    // MARK: - Making a thread

    /// A thread that is not started yet and will run `block` (NSThread's `init(block:)`). Set its stack size
    /// and priority (and change its name) before `start()` or `startJoinable()`. Inside the block,
    /// `SpindleThread.current` is this object. The block is released once it has returned (before the thread
    /// reports `isFinished`), or with the object if the thread is never started.
    ///
    /// - Parameter name: the thread's name, cut to 15 bytes on a UTF-8 boundary (Linux's limit).
    public convenience init(name: String = "spindle", block: @escaping @Sendable () -> Void) {
        self.init(name: name)
        self.work = .block(block)  // not shared yet: no lock needed
    }

    /// A thread that is not started yet and will run `body`, which is given the thread itself (to poll
    /// `isCancelled`, read its name) without capturing it. Otherwise as `init(name:block:)`.
    public convenience init(name: String = "spindle", body: @escaping @Sendable (SpindleThread) -> Void) {
        self.init(name: name)
        self.work = .body(body)  // not shared yet: no lock needed
    }

    // MARK: - Starting and cancelling

    /// Starts the thread, detached (as NSThread's `start()`): `main()` runs on a new pthread, which cleans up after
    /// itself when `main()` returns. Returns once the pthread exists (`main()` may not have begun).
    ///
    /// A thread cancelled before this call does not run at all: `start()` returns without making a pthread, the
    /// body is released unrun, and the thread reports `isFinished` and `isCancelled`.
    ///
    /// - Throws: `SpindleError.threadAlreadyStarted` if the thread was started before (or another thread is
    ///   starting it right now), or was running from the start (`main`, `current`, `detach`, `spawnJoinable`):
    ///   nothing changes. `SpindleError.system` (`pthread_create`; EAGAIN: out of threads or memory) when the
    ///   pthread cannot be made: the thread is then as it was before the call (unstarted, its body and
    ///   configuration kept), so `start()` can be tried again later; an object never started releases its body
    ///   when it is released.
    public func start() throws(SpindleError) { try self.launch(detached: true) }

    /// Starts the thread as `start()` does, but joinable: call `join()` exactly once afterwards (a joinable
    /// thread released without `join()` is reported, see `unjoinedReleaseCount`). A thread cancelled before this
    /// call never runs, and joining it returns at once. Throws as `start()`.
    public func startJoinable() throws(SpindleError) { try self.launch(detached: false) }

    /// Whether `cancel()` was called on this thread (lock-free; never goes back to false).
    public var isCancelled: Bool { self.cancelled.load(ordering: .acquiring) }

    // MARK: - Stack size

    /// The stack size the thread is (or will be) made with, in bytes, rounded as `setStackSize(_:)` says; nil for
    /// the system's default (also for the main thread and threads Spindle did not create).
    public var stackSize: Int? {
        self.fieldsLock.lock()
        defer { self.fieldsLock.unlock() }
        return self.stackSizeValue == 0 ? nil : self.stackSizeValue
    }

    /// Sets the stack size of a thread that has not been started. `bytes` below `minimumStackSize` is rounded up
    /// to it, and every size up to whole pages; nil goes back to the system's default.
    ///
    /// - Throws: `SpindleError.threadStackSizeFixed` once the thread was started (or is being started), and for
    ///   the main thread and threads Spindle did not create; `SpindleError.system` (`pthread_attr_setstacksize`,
    ///   EINVAL) for a size too large to round. Nothing changes then.
    public func setStackSize(_ bytes: Int?) throws(SpindleError) {
        var size = 0
        if let bytes { size = try SpindleThread.roundedStackSize(bytes) }
        self.fieldsLock.lock()
        guard self.lifecycle.load(ordering: .acquiring) == Lifecycle.unstarted.rawValue else {
            let name = self.nameValue
            self.fieldsLock.unlock()
            throw .threadStackSizeFixed(name: name)
        }
        self.stackSizeValue = size
        self.fieldsLock.unlock()
    }

    /// The smallest stack Spindle asks for: PTHREAD_STACK_MIN rounded up to whole pages.
    public static var minimumStackSize: Int {
        let page = max(sysconf(Int32(_SC_PAGESIZE)), 4096)
        let minimum = Int(cshim_stack_min())
        return (minimum + page - 1) / page * page
    }

    /// `bytes` raised to `minimumStackSize` and rounded up to whole pages.
    static func roundedStackSize(_ bytes: Int) throws(SpindleError) -> Int {
        let page = max(sysconf(Int32(_SC_PAGESIZE)), 4096)
        let (padded, overflow) = max(bytes, minimumStackSize).addingReportingOverflow(page - 1)
        // A size so large it cannot be rounded cannot be allocated either: report it as pthread would.
        if overflow { throw .system(function: "pthread_attr_setstacksize", errno: EINVAL) }
        return padded / page * page
    }

    // MARK: - Made and started at once

    /// Starts a detached thread running `body`. It cleans up after itself when `body` returns. The same as
    /// `SpindleThread(name:block:)`, configured, then `start()`, except that a failed start leaves no object
    /// behind: the body is released before this throws.
    ///
    /// - Parameters:
    ///   - name: the thread's name, cut to 15 bytes on a UTF-8 boundary (Linux's limit).
    ///   - stackSize: bytes; nil keeps the default; rounded as `setStackSize(_:)` says.
    ///   - priority: 0…1 (clamped), 0.5 is the default nice value; see `priority`.
    /// - Throws: `SpindleError.system` when pthread_create fails (EAGAIN: out of threads or memory), or for a
    ///   stack size too large to round (`pthread_attr_setstacksize`, EINVAL).
    @discardableResult
    public static func detach(name: String = "spindle", stackSize: Int? = nil, priority: Double = 0.5,
                              _ body: @escaping @Sendable () -> Void) throws(SpindleError) -> SpindleThread {
        let thread = try SpindleThread.configured(name: name, stackSize: stackSize, priority: priority, .block(body))
        try thread.launch(detached: true)
        return thread
    }

    /// Starts a detached thread that runs `entry.runOnSpawnedThread()`: `detach` without a closure to allocate (a
    /// concurrent operation's start). Default stack size and priority. Throws as `detach`.
    static func detach(name: String, entry: any SpawnedThreadEntry) throws(SpindleError) {
        try SpindleThread.configured(name: name, stackSize: nil, priority: 0.5, .entry(entry)).launch(detached: true)
    }

    /// Starts a joinable thread running `body`. Call `join()` on the result exactly once.
    /// Parameters and errors as for `detach`.
    public static func spawnJoinable(name: String = "spindle", stackSize: Int? = nil, priority: Double = 0.5,
                                     _ body: @escaping @Sendable () -> Void) throws(SpindleError) -> SpindleThread {
        let thread = try SpindleThread.configured(name: name, stackSize: stackSize, priority: priority, .block(body))
        try thread.launch(detached: false)
        return thread
    }

    /// An unstarted thread with these settings and this work (set directly: the object is not shared yet).
    private static func configured(name: String, stackSize: Int?, priority: Double, _ work: Work)
        throws(SpindleError) -> SpindleThread
    {
        let thread = SpindleThread(name: name)
        if let stackSize { thread.stackSizeValue = try roundedStackSize(stackSize) }
        thread.priorityBits.store(clampPriority(priority).bitPattern, ordering: .relaxed)
        thread.work = work
        return thread
    }

    // MARK: - The start and the thread's own run

    /// `start()` and `startJoinable()`: claim the thread, then make its pthread (or finish it at once if it was
    /// cancelled). See the type's state machine.
    private func launch(detached: Bool) throws(SpindleError) {
        _ = ForkGeneration.current  // fork tracking on before any thread of ours exists (see `threadID`); no lock held
        self.fieldsLock.lock()  // the claim and `setStackSize` exclude each other: the size read here is final
        let claimed = self.lifecycle.compareExchange(
            expected: Lifecycle.unstarted.rawValue, desired: Lifecycle.starting.rawValue,
            ordering: .acquiringAndReleasing
        ).exchanged
        let stackSize = self.stackSizeValue
        self.fieldsLock.unlock()
        guard claimed else { throw .threadAlreadyStarted(name: self.name) }
        let joinState = detached ? JoinState.detached : JoinState.joinable
        if self.cancelled.load(ordering: .acquiring) {
            _ = self.takeWork()  // never runs: its captures go now (after the lock: their deinit is user code)
            self.joinState.store(joinState.rawValue, ordering: .releasing)  // no handle: `join()` returns at once
            self.lifecycle.store(Lifecycle.exited.rawValue, ordering: .releasing)
            return
        }
        // The object exists before the thread runs (it is `current` there); the handle is stored once known. Its
        // thread context is made here too and handed over retained: the new thread installs it as it is.
        let context = Unmanaged.passRetained(ThreadContext(spawned: self))
        if detached { self.joinState.store(JoinState.detached.rawValue, ordering: .releasing) }  // needs no handle
        var handle = pthread_t()
        SpindleThread.liveSpawned.add(1, ordering: .relaxed)
        let err = cshim_pthread_create(&handle, detached ? 1 : 0, stackSize, spindleThreadEntry, context.toOpaque())
        if err != 0 {
            SpindleThread.liveSpawned.subtract(1, ordering: .relaxed)
            context.release()
            // Back as it was: unstarted, body and configuration kept.
            self.joinState.store(JoinState.unstarted.rawValue, ordering: .releasing)
            self.lifecycle.store(Lifecycle.unstarted.rawValue, ordering: .releasing)
            throw .system(function: "pthread_create", errno: err)
        }
        self.handleStorage.store(UInt(handle), ordering: .releasing)
        if !detached { self.joinState.store(JoinState.joinable.rawValue, ordering: .releasing) }  // after the handle
    }

    /// Runs on the new thread, its context already installed: publish identity, apply name and priority, run
    /// `main()` (or the entry), release the work, report the end.
    fileprivate func runStarted() {
        let tid = cshim_gettid()
        let me = pthread_self()
        self.kernelLock.lock()
        self.handleStorage.store(UInt(me), ordering: .releasing)
        self.tidGeneration.store(cshim_fork_generation(), ordering: .relaxed)
        self.tidStorage.store(tid, ordering: .releasing)
        self.fieldsLock.lock()  // `name` would take it too; kernelLock before fieldsLock
        let name = self.nameValue
        self.fieldsLock.unlock()
        // Even an empty name: the kernel's must match `name`, not stay the one inherited from the creator.
        _ = name.withCString { cshim_pthread_setname_np(me, $0) }
        // Always set our own nice value: a new thread inherits its creator's, which may not be ours.
        let wanted = SpindleThread.niceValue(forPriority: self.priority)
        if cshim_getpriority_thread(tid) != wanted { _ = cshim_setpriority_thread(tid, wanted) }
        // Running only now: whoever sees isExecuting finds the name and nice value already applied.
        self.lifecycle.store(Lifecycle.running.rawValue, ordering: .releasing)
        self.kernelLock.unlock()
        if case .entry(let entry)? = self.copyWork() {
            entry.runOnSpawnedThread()
        } else {
            self.main()
        }
        _ = self.takeWork()  // the captures are released here, before the end is reported
        self.kernelLock.lock()
        self.lifecycle.store(Lifecycle.exited.rawValue, ordering: .releasing)
        self.kernelLock.unlock()
        SpindleThread.liveSpawned.subtract(1, ordering: .releasing)
        // The thread context keeps `self` alive until its thread-local destructor runs at thread exit.
    }

    /// The work, copied under `fieldsLock` (the caller's copy is released after the lock is dropped).
    func copyWork() -> Work? {
        self.fieldsLock.lock()
        defer { self.fieldsLock.unlock() }
        return self.work
    }

    /// Takes the work out under `fieldsLock`; the caller releases it, after the lock is dropped.
    private func takeWork() -> Work? {
        self.fieldsLock.lock()
        defer { self.fieldsLock.unlock() }
        return self.work.take()
    }
}

/// What a Spindle thread can run instead of a closure (see `SpindleThread.detach(name:entry:)`).
protocol SpawnedThreadEntry: AnyObject {
    /// Runs on the new thread once its start-up is done (name and priority applied); the thread ends after it.
    func runOnSpawnedThread()
}

/// The C entry point of every Spindle thread: installs the thread context the starter passed retained (its
/// thread-local key takes over that reference) and runs the thread.
private func spindleThreadEntry(_ context: UnsafeMutableRawPointer?) {
    ThreadContext.installSpawned(context!).thread.runStarted()
}
