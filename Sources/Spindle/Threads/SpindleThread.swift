import CShim
import Glibc
import Synchronization

/// A pthread with NSThread's life: made unstarted (`init(name:)` in a subclass overriding `main()`,
/// `init(name:block:)`, `init(name:body:)`), configured (name, stack size, priority), started once (`start()`,
/// detached as NSThread's are, or `startJoinable()`), cancelled cooperatively (`cancel()`, `isCancelled`). `detach`
/// and `spawnJoinable` make one and start it at once. `current` is the calling thread's object, `main` the main
/// thread's.
///
/// States (`lifecycle`, an atomic) and their transitions:
/// - `unstarted`: made by an initializer; the stack size can be set. `start()` / `startJoinable()` claim it
///   (compare-and-swap under `fieldsLock`, so a racing `setStackSize` is either before the claim or refused)
///   → `starting`. Exactly one caller claims; every other start throws `threadAlreadyStarted`.
/// - `starting`: the claiming starter owns the start; the stack size is fixed. Then, by that starter: cancelled
///   (`cancelled` read after the claim) → `exited` without a pthread (the body is released unrun); `pthread_create`
///   fails → back to `unstarted` (body and configuration kept, startable again; the start throws); it succeeds →
///   stays `starting` until the new thread's start-up sets `running`.
/// - `running`: set by the thread itself, once its name and priority are applied, just before `main()`. The main
///   thread's object and adopted threads' objects (met through `current`) are `running` from the start, for good.
/// - `exited`: set by the thread itself (under `kernelLock`) after `main()` returned and the body was released; or
///   by a cancelled start. Final.
///
/// `cancelled` (an atomic): false → true by `cancel()`, at any time and from any thread; never back. Only the
/// starter acts on it (right after its claim); a running body polls `isCancelled`.
///
/// `joinState` (an atomic), set by the starter: `unstarted` → `detached` before `pthread_create` (`start()`), or →
/// `joinable` once the pthread exists and its handle is stored (`startJoinable()`: so whoever sees `joinable` sees
/// the handle; the thread itself may run before that, which only `join()` on itself notices, and it throws
/// `joinSelf` either way); a cancelled start sets either with no handle (`join()` then returns at once); a failed
/// start goes back to `unstarted`. `joinable` → `joined` (by `join()`) or → `detached` (`relinquish()`). The main
/// thread's and adopted threads' objects are `detached` from the start.
///
/// Guards and confinement:
/// - `handleStorage` (atomic, 0 until known): written by the starter after `pthread_create` and by the thread at its
///   start-up (the same value); `tidStorage` (atomic, 0 until known) and `tidGeneration`: by the thread at its
///   start-up. Never changed afterwards (a forked child corrects the id as it reads it: `threadID`). `origin` (`isMain`, `isAdopted`) is set at init.
/// - `nameValue`, `stackSizeValue` and `work` are under `fieldsLock` (inline). `stackSizeValue` changes only while
///   `unstarted`. `work` (the block or body, or an internal entry) is set at init, copied out by `main()`, and
///   taken by the thread when `main()` returned (or by a cancelled start); it is released after the lock is
///   dropped, so no capture's deinit runs under it. `priorityBits` is an atomic (read lock-free on every
///   operation start). Any thread may read or set name and priority at any time; applying them to the kernel
///   happens under `kernelLock` (inline, held only around a few syscalls).
/// - Lock order: `kernelLock` before `fieldsLock`. No user code (body, `main()`, a capture's deinit) runs under
///   either.
///
/// Start-up of a started thread (all before `main()`, in this order): it becomes its own `current` (its
/// `ThreadContext`, made by the starter, is installed), then under `kernelLock` publishes handle and kernel id,
/// gives the kernel its name (`prctl`), sets its nice value if the inherited one differs, and only then stores
/// `.running` (so whoever sees `isExecuting` finds name and nice value applied). Three
/// syscalls: `gettid`, `prctl(PR_SET_NAME)`, `getpriority` (plus `setpriority` when the creator's nice value was
/// not the one wanted). So the name is in /proc and the priority applied before any user code runs there. The
/// stack size was given to `pthread_create`.
///
/// Lifetime: a started thread keeps its `SpindleThread` alive until it exits (its `ThreadContext`, released at
/// thread exit, holds it: it is its `current`). The body's captures are released when `main()` has returned,
/// before the thread reports `isFinished` (so also before `join()` returns); an unstarted thread releases its body
/// with the object. A joinable thread must be joined; one released without `join()` is reported to
/// `SpindleDiagnostics` (`.threadReleasedWithoutJoin`), counted in `unjoinedReleaseCount`, and detached so that its
/// resources are freed anyway.
open class SpindleThread: @unchecked Sendable, CustomStringConvertible {
    enum Lifecycle: UInt8 { case unstarted = 0, starting = 1, running = 2, exited = 3 }
    enum JoinState: UInt8 { case unstarted = 0, joinable = 1, joined = 2, detached = 3 }
    /// What a started thread runs: a block (`init(name:block:)`, `detach`), a body given the thread
    /// (`init(name:body:)`), or an internal entry (`detach(name:entry:)`, no closure to allocate).
    enum Work {
        case block(@Sendable () -> Void)
        case body(@Sendable (SpindleThread) -> Void)
        case entry(any SpawnedThreadEntry)
    }

    /// The pthread handle as a raw value (0 until known); see the type's notes.
    let handleStorage = Atomic<UInt>(0)
    let tidStorage = Atomic<Int32>(0)
    /// The fork generation (`cshim_fork_generation`, read raw: never the first use that starts tracking, which may
    /// report to a user's handler) `tidStorage` was stored in: in a forked child, an id from the parent names a
    /// thread of the parent (see `threadID`). Tracking is on once any Spindle thread was started (`launch`).
    let tidGeneration = Atomic<UInt64>(0)
    let lifecycle = Atomic<UInt8>(Lifecycle.unstarted.rawValue)
    let cancelled = Atomic<Bool>(false)
    let joinState = Atomic<UInt8>(JoinState.unstarted.rawValue)
    let fieldsLock = InlineLock()
    /// Held while applying the name or nice value to the kernel, and while the thread marks itself exited, so a
    /// setter and the thread's own start-up cannot undo each other and no setter touches an exited thread. Inline
    /// (no allocation per thread): held only around short syscalls (prctl, get/setpriority, a /proc comm write).
    let kernelLock = InlineLock()
    var nameValue: String  // protected by fieldsLock (written with kernelLock held too)
    var stackSizeValue = 0  // protected by fieldsLock; bytes, 0 = the default; changes only while unstarted
    var work: Work?  // protected by fieldsLock; see the type's notes
    let priorityBits = Atomic<UInt64>((0.5).bitPattern)
    /// What made this object: an initializer (`.made`), the main thread, or a thread Spindle did not create (set
    /// by the private convenience initializers, before the object is shared; never changed afterwards).
    private(set) var origin = Origin.made
    enum Origin: UInt8 { case made, main, adopted }

    /// Whether this is the process's main thread.
    public final var isMain: Bool { self.origin == .main }
    /// A thread Spindle did not create (met through `current`): its kernel state is only changed from itself,
    /// since nothing tells us when it exits.
    var isAdopted: Bool { self.origin == .adopted }

    // MARK: - Current and main thread

    /// The thread calling this: the same object on every access from one thread. One thread-local load once
    /// known (the calling thread's `ThreadContext` holds it).
    public static var current: SpindleThread { ThreadContext.current.thread }

    /// The `SpindleThread` of a calling thread that has none yet: the main thread's object, or a new adopted one.
    /// Only `ThreadContext` calls this, once per thread, and keeps the result.
    static func identifyCallingThread() -> SpindleThread {
        cshim_gettid() == getpid() ? SpindleThread.main : SpindleThread(adopting: ())
    }

    /// The process's main thread (the one whose kernel id is the process id).
    public static let main: SpindleThread = SpindleThread(mainThread: ())

    /// Whether the calling thread is the process's main thread.
    public static var isMainThread: Bool { cshim_gettid() == getpid() }

    /// Joinable threads released without `join()` (each also reported to `SpindleDiagnostics`).
    public static var unjoinedReleaseCount: Int { unjoinedReleases.load(ordering: .relaxed) }
    private static let unjoinedReleases = Atomic<Int>(0)

    /// Spindle-spawned threads currently alive (both kinds), for tests and leak checks.
    public static var liveSpawnedCount: Int { liveSpawned.load(ordering: .acquiring) }
    static let liveSpawned = Atomic<Int>(0)

    // Only public designated initializers, so that subclasses in other modules inherit the convenience ones
    // (`init(name:block:)`, `init(name:body:)`): the main and adopted threads' objects are convenience-made.

    private convenience init(mainThread: ()) {
        // Read the main thread's own name from /proc: `main` may be first touched on another thread.
        self.init(name: SpindleThread.commName(tid: getpid()) ?? "main")
        self.origin = .main
        self.joinState.store(JoinState.detached.rawValue, ordering: .relaxed)
        self.tidGeneration.store(ForkGeneration.current, ordering: .relaxed)  // starts fork tracking
        self.tidStorage.store(getpid(), ordering: .relaxed)
        self.lifecycle.store(Lifecycle.running.rawValue, ordering: .relaxed)
    }

    /// A thread Spindle did not create (for `current`).
    private convenience init(adopting: ()) {
        self.init(name: SpindleThread.kernelName(of: pthread_self()) ?? "")
        self.origin = .adopted
        self.handleStorage.store(UInt(pthread_self()), ordering: .relaxed)
        self.joinState.store(JoinState.detached.rawValue, ordering: .relaxed)
        self.tidGeneration.store(ForkGeneration.current, ordering: .relaxed)  // starts fork tracking
        self.tidStorage.store(cshim_gettid(), ordering: .relaxed)
        self.lifecycle.store(Lifecycle.running.rawValue, ordering: .relaxed)
    }

    /// A thread that is not started yet, with nothing to run but its `main()`: for a subclass that overrides
    /// `main()`. Set its stack size and priority (and change its name) before `start()` or `startJoinable()`.
    ///
    /// - Parameter name: the thread's name, cut to 15 bytes on a UTF-8 boundary (Linux's limit).
    public init(name: String = "spindle") {
        self.nameValue = SpindleThread.truncatedName(name)
    }

    // MARK: - Overridable (in the class body: members of extensions cannot be overridden)

    /// The thread's work. This one runs the block or body given to the initializer (nothing if there was none);
    /// a subclass overrides it to do its own work (calling `super.main()` only if it was also given a block).
    ///
    /// `start()` and `startJoinable()` call it on the new thread, once its name and priority are applied; when it
    /// returns, the thread ends. Don't call it yourself: it would run the work on your thread (as NSThread's does).
    open func main() {
        switch self.copyWork() {
        case .block(let block)?: block()
        case .body(let body)?: body(self)
        case .entry?, nil: return  // an entry is run by the start-up itself, never through `main()`
        }
    }

    /// Marks the thread cancelled (NSThread's `cancel()`); nothing else. Before the start, the thread will not
    /// run at all (see `start()`); after it, its `main()` (or body) should poll `isCancelled` and return. Any
    /// thread, any time, any number of times. Override it to also wake a body that is waiting (a semaphore, a
    /// port): call `super.cancel()` first.
    open func cancel() { self.cancelled.store(true, ordering: .releasing) }

    deinit {
        let handle = self.handleStorage.load(ordering: .acquiring)
        // A parent's thread released in a forked child: its handle may name one of the child's threads now.
        if self.isParentsThread { return }
        if self.joinState.load(ordering: .acquiring) == JoinState.joinable.rawValue, handle != 0 {
            SpindleThread.unjoinedReleases.add(1, ordering: .relaxed)
            _ = pthread_detach(pthread_t(handle))
            SpindleDiagnostics.report(.threadReleasedWithoutJoin(name: self.name))
        }
    }

    // MARK: - Joining

    /// Waits for a joinable thread to end. Throws if the thread is detached, was already joined, is the calling
    /// thread, was not started (or its `startJoinable()` has not returned yet), or is itself waiting, through a
    /// chain of `join()`s, for the calling thread (`joinCycle`: the wait would never end); nothing changes then. A
    /// thread cancelled before `startJoinable()` never ran: joining it returns at once.
    public func join() throws(SpindleError) {
        let name = self.name
        if self.isMain { throw .threadNotJoinable(name: name) }
        // In a forked child the thread is the parent's: nothing of it runs here, and its handle may name one of the
        // child's threads.
        if self.isParentsThread { throw .forkedChild(name: name) }
        let state = self.joinState.load(ordering: .acquiring)
        if state == JoinState.detached.rawValue { throw .threadNotJoinable(name: name) }
        // Before `unstarted`: the thread itself may run before its starter has published `joinable`.
        if self === ThreadContext.knownThread { throw .joinSelf(name: name) }
        if state == JoinState.unstarted.rawValue { throw .threadNotStarted(name: name) }
        // A thread Spindle made may itself be joined, so its wait is recorded (`JoinWaits`) and a join that would
        // close a cycle throws `joinCycle` before claiming anything. Any other caller cannot be part of a cycle.
        if let caller = ThreadContext.knownThread, caller.origin == .made {
            try JoinWaits.enter(caller, joining: self) { () throws(SpindleError) in try self.claimJoin(name: name) }
            defer { JoinWaits.leave(caller) }
            self.waitForExit()
        } else {
            try self.claimJoin(name: name)
            self.waitForExit()
        }
    }

    /// `joinable` → `joined`, or throws (detached, or joined already) and changes nothing.
    private func claimJoin(name: String) throws(SpindleError) {
        let (exchanged, original) = self.joinState.compareExchange(
            expected: JoinState.joinable.rawValue, desired: JoinState.joined.rawValue, ordering: .acquiringAndReleasing)
        if !exchanged {
            if original == JoinState.detached.rawValue { throw .threadNotJoinable(name: name) }
            throw .threadAlreadyJoined(name: name)
        }
    }

    /// After a successful claim: waits in `pthread_join` for the thread to end; on a `SpindleThreadPool`'s thread, as
    /// a wait the pool sees (another thread serves meanwhile: the joined one may wait for work on that pool).
    private func waitForExit() {
        // Stored before `joinable` was published; 0 only for a start that was cancelled (no pthread to join).
        let handle = self.handleStorage.load(ordering: .acquiring)
        if handle != 0 {
            ThreadContext.current.blocking { checkPthread(pthread_join(pthread_t(handle), nil), "pthread_join") }
        }
    }

    /// Detaches a joinable thread instead of joining it: for a thread that must let itself go (a queue worker
    /// that performs its queue's shutdown). Does nothing if it was joined or detached already. Callers hold the
    /// object `spawnJoinable` returned, so they see it `joinable` (see `joinState`).
    func relinquish() {
        let (exchanged, _) = self.joinState.compareExchange(
            expected: JoinState.joinable.rawValue, desired: JoinState.detached.rawValue, ordering: .acquiringAndReleasing)
        let handle = self.handleStorage.load(ordering: .acquiring)
        if exchanged, handle != 0 { checkPthread(pthread_detach(pthread_t(handle)), "pthread_detach") }
    }

    // MARK: - State, name and priority

    /// In a forked child: a thread of the parent (started there, and not the one that forked), whose pthread handle
    /// and locks are the parent's. Its name and priority are stored only, and `join()` throws `forkedChild`.
    var isParentsThread: Bool {
        self.tidStorage.load(ordering: .acquiring) != 0
            && ForkGeneration.isInherited(self.tidGeneration.load(ordering: .relaxed))
            && ThreadContext.knownThread !== self
    }

    /// The kernel thread id (0 until the thread has started running). In a forked child, a thread of the parent
    /// reads 0 (it does not exist there), except the one that forked, which reads its id in the child: so
    /// `setPriority` there never reaches a thread of the parent.
    public final var threadID: Int32 {
        let tid = self.tidStorage.load(ordering: .acquiring)
        guard tid != 0, ForkGeneration.isInherited(self.tidGeneration.load(ordering: .relaxed)) else { return tid }
        return ThreadContext.knownThread === self ? cshim_gettid() : 0
    }

    /// Whether the thread's `main()` is running: from just before it is called until it has returned. False
    /// before the start, and while a start is still creating the pthread.
    public final var isExecuting: Bool { self.lifecycle.load(ordering: .acquiring) == Lifecycle.running.rawValue }

    /// Whether the thread is done: its `main()` has returned (and the body was released), or it was cancelled
    /// before it started and so never ran.
    public final var isFinished: Bool { self.lifecycle.load(ordering: .acquiring) == Lifecycle.exited.rawValue }

    /// The thread's name: at most 15 bytes, cut on a UTF-8 boundary. Readable and settable from any thread at any
    /// time. Setting it also renames the thread in the kernel (a thread not started yet, or started and not yet
    /// running, takes the name as it starts, before `main()` runs), except when the kernel refuses (EPERM in some
    /// containers: ignored), on a thread that has exited, and on a thread Spindle did not spawn, other than the
    /// main thread, set from another thread (only that thread renames itself there); in those cases only the
    /// stored value changes.
    public final var name: String {
        get {
            self.fieldsLock.lock()
            defer { self.fieldsLock.unlock() }
            return self.nameValue
        }
        set {
            let cut = SpindleThread.truncatedName(newValue)
            // Store and apply under kernelLock: the thread's start-up applies the stored name under it too, and
            // marks itself exited under it, so the kernel ends with the last name set and no exited thread is hit.
            // pthread_setname_np failures (EPERM in containers) are ignored; the stored name still changes.
            if self.isParentsThread {  // a forked child: stored only (a parent thread may have held `kernelLock`)
                self.fieldsLock.lock()
                self.nameValue = cut
                self.fieldsLock.unlock()
                return
            }
            self.withKernelLock {
                self.fieldsLock.lock()
                self.nameValue = cut
                self.fieldsLock.unlock()
                if self.isMain {
                    if SpindleThread.isMainThread {
                        _ = cut.withCString { cshim_pthread_setname_np(pthread_self(), $0) }
                    } else {
                        SpindleThread.writeCommName(cut, tid: getpid())  // main's kernel id is the process id
                    }
                } else if self.isAdopted {
                    if ThreadContext.knownThread === self {
                        _ = cut.withCString { cshim_pthread_setname_np(pthread_self(), $0) }
                    }
                } else {
                    let target = self.handleStorage.load(ordering: .acquiring)
                    if target != 0, !self.isFinished {
                        _ = cut.withCString { cshim_pthread_setname_np(pthread_t(target), $0) }
                    }
                }
            }
        }
    }

    /// The thread's scheduling priority in 0…1 (clamped); 0.5 is nice 0, 1 is nice -20, 0 is nice 19. Reads
    /// return the value last set. Setting applies the nice value to this one thread; raising priority above the
    /// process's needs CAP_SYS_NICE, and then the kernel keeps its old value (the call reports false). Set before
    /// the start, it is applied by the thread's start-up, before `main()` runs.
    public final var priority: Double { Double(bitPattern: self.priorityBits.load(ordering: .relaxed)) }

    /// Sets `priority` (see there). Returns whether the kernel accepted the new nice value; false when there was
    /// nothing to apply it to yet (not started: the start applies it) or any more (exited).
    @discardableResult
    public final func setPriority(_ value: Double) -> Bool {
        let clamped = SpindleThread.clampPriority(value)
        if self.isParentsThread {  // a parent thread may have held `kernelLock` at the fork: not taken here
            self.priorityBits.store(clamped.bitPattern, ordering: .relaxed)
            return false
        }
        return self.withKernelLock {  // see `name`: the same rule for the nice value
            self.priorityBits.store(clamped.bitPattern, ordering: .relaxed)
            let tid = self.threadID
            guard tid != 0, !self.isFinished else { return false }
            if self.isAdopted && ThreadContext.knownThread !== self { return false }
            return SpindleThread.applyNice(forPriority: clamped, tid: tid)
        }
    }

    /// Runs `body` with `kernelLock` held.
    func withKernelLock<T>(_ body: () -> T) -> T {
        self.kernelLock.lock()
        defer { self.kernelLock.unlock() }
        return body()
    }

    /// The nice value Spindle uses for a priority in 0…1.
    public static func niceValue(forPriority priority: Double) -> Int32 {
        let nice = ((0.5 - clampPriority(priority)) * 40).rounded()
        return Int32(min(19, max(-20, nice)))
    }

    /// "SpindleThread(name, tid N)": the kernel name and thread id (tid 0 until the thread has started). This is how
    /// the examples print thread identities. Any thread.
    public var description: String { "SpindleThread(\(self.name), tid \(self.threadID))" }

    // MARK: - Helpers

    static func clampPriority(_ p: Double) -> Double { p.isNaN ? 0.5 : min(1, max(0, p)) }

    static func applyNice(forPriority priority: Double, tid: Int32) -> Bool {
        cshim_setpriority_thread(tid, niceValue(forPriority: priority)) == 0
    }

    /// Cuts `name` to at most 15 bytes of UTF-8 without splitting a character's encoding; drops NUL bytes.
    /// Allocates nothing: a name that already fits is returned as it is, a cut one is built in a 16-byte buffer.
    public static func truncatedName(_ name: String) -> String {
        let utf8 = name.utf8
        if utf8.count <= 15 && utf8.withContiguousStorageIfAvailable({ !$0.contains(0) }) == true { return name }
        var storage: (UInt64, UInt64) = (0, 0)
        return withUnsafeMutableBytes(of: &storage) { buffer in
            var length = 0
            for scalar in name.unicodeScalars where scalar.value != 0 {
                if length + UTF8.width(scalar) > 15 { break }
                UTF8.encode(scalar) { byte in
                    buffer[length] = byte
                    length += 1
                }
            }
            return String(decoding: UnsafeRawBufferPointer(rebasing: buffer[..<length]), as: UTF8.self)
        }
    }

    /// The name in /proc/self/task/<tid>/comm (without the newline), or nil if it cannot be read.
    static func commName(tid: Int32) -> String? {
        let fd = open("/proc/self/task/\(tid)/comm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { _ = close(fd) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = read(fd, &buffer, buffer.count)
        guard n > 0 else { return nil }
        var bytes = buffer.prefix(n)
        if bytes.last == 10 { bytes = bytes.dropLast() }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Writes /proc/self/task/<tid>/comm (what pthread_setname_np does for another thread). Failures are
    /// ignored, as for pthread_setname_np (EPERM is seen in containers).
    static func writeCommName(_ name: String, tid: Int32) {
        let fd = open("/proc/self/task/\(tid)/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { _ = close(fd) }
        name.withCString { pointer in _ = write(fd, pointer, strlen(pointer)) }
    }

    static func kernelName(of thread: pthread_t) -> String? {
        var buffer = [CChar](repeating: 0, count: 32)
        guard cshim_pthread_getname_np(thread, &buffer, buffer.count) == 0 else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
