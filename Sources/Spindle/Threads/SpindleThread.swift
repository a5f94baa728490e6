import CShim
import Glibc
import Synchronization

/// A pthread: spawned detached or joinable, with a name, a stack size and a priority (NSThread's role).
///
/// Guards and confinement:
/// - `handle`, `tid`, `isDetached`, `isMain` are set before the thread is visible to anyone else and never change;
///   `tid` is published by the new thread itself and read through `tidStorage` (an atomic; 0 until known).
/// - `lifecycle` is an atomic: `.created` → `.running` → `.exited` (forward only; set by the thread itself);
///   `joinState` is an atomic: `.joinable` → `.joined` (by `join()`), or `.detached` from the start.
/// - `nameValue` is under `fieldsLock` (inline); `priorityBits` is an atomic (read lock-free on every operation
///   start). Any thread may read or set them; applying them to the kernel happens under `kernelLock` (inline,
///   held only around a few syscalls). Lock order: `kernelLock` before `fieldsLock`.
/// - `startBody` / `startEntry`: written by the spawner before `pthread_create` (which orders them before the new
///   thread's first instruction), then taken and cleared by the new thread itself; nobody else touches them.
///
/// Start-up of a spawned thread (all before its body runs, in this order): it becomes its own `current` (its
/// `ThreadContext`, made by the spawner, is installed), then under `kernelLock` publishes handle, kernel id and
/// `.running`, gives the kernel its name (`prctl`) and sets its nice value if the inherited one differs. Three
/// syscalls: `gettid`, `prctl(PR_SET_NAME)`, `getpriority` (plus `setpriority` when the creator's nice value was
/// not the one wanted). So the name is in /proc and the priority applied before any user code runs there.
///
/// Lifetime: a spawned thread keeps its `SpindleThread` alive until it exits (its `ThreadContext`, released at
/// thread exit, holds it: it is its `current`). A joinable thread must be joined; one released without `join()`
/// is reported to `SpindleDiagnostics` (`.threadReleasedWithoutJoin`), counted in `unjoinedReleaseCount`, and
/// detached so that its resources are freed anyway.
public final class SpindleThread: @unchecked Sendable, CustomStringConvertible {
    private enum Lifecycle: UInt8 { case created = 0, running = 1, exited = 2 }
    private enum JoinState: UInt8 { case joinable = 0, joined = 1, detached = 2 }

    /// The pthread handle as a raw value (0 until known); written once by the spawner, read by `join` and `name`.
    private let handleStorage = Atomic<UInt>(0)
    private let tidStorage = Atomic<Int32>(0)
    private let lifecycle = Atomic<UInt8>(Lifecycle.created.rawValue)
    private let joinState: Atomic<UInt8>
    private let fieldsLock = InlineLock()
    /// Held while applying the name or nice value to the kernel, and while the thread marks itself exited, so a
    /// setter and the thread's own start-up cannot undo each other and no setter touches an exited thread. Inline
    /// (no allocation per thread): held only around short syscalls (prctl, get/setpriority, a /proc comm write).
    private let kernelLock = InlineLock()
    private var nameValue: String  // protected by fieldsLock (written with kernelLock held too)
    /// What a spawned thread runs (one of the two): see the type's confinement notes.
    private var startBody: (() -> Void)?
    private var startEntry: (any SpawnedThreadEntry)?
    private let priorityBits = Atomic<UInt64>((0.5).bitPattern)
    /// Whether this is the process's main thread.
    public let isMain: Bool
    /// A thread Spindle did not create (met through `current`): its kernel state is only changed from itself,
    /// since nothing tells us when it exits.
    private let isAdopted: Bool

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
    private static let liveSpawned = Atomic<Int>(0)

    private init(mainThread: ()) {
        self.isMain = true
        self.isAdopted = false
        self.joinState = Atomic(JoinState.detached.rawValue)
        self.tidStorage.store(getpid(), ordering: .relaxed)
        self.lifecycle.store(Lifecycle.running.rawValue, ordering: .relaxed)
        // Read the main thread's own name from /proc: `main` may be first touched on another thread.
        self.nameValue = SpindleThread.commName(tid: getpid()) ?? "main"
    }

    /// A thread Spindle did not create (for `current`).
    private init(adopting: ()) {
        self.isMain = false
        self.isAdopted = true
        self.handleStorage.store(UInt(pthread_self()), ordering: .relaxed)
        self.joinState = Atomic(JoinState.detached.rawValue)
        self.tidStorage.store(cshim_gettid(), ordering: .relaxed)
        self.lifecycle.store(Lifecycle.running.rawValue, ordering: .relaxed)
        self.nameValue = SpindleThread.kernelName(of: pthread_self()) ?? ""
    }

    private init(name: String, priority: Double, detached: Bool) {
        self.isMain = false
        self.isAdopted = false
        self.joinState = Atomic(detached ? JoinState.detached.rawValue : JoinState.joinable.rawValue)
        self.nameValue = name
        self.priorityBits.store(priority.bitPattern, ordering: .relaxed)
    }

    deinit {
        let handle = self.handleStorage.load(ordering: .acquiring)
        if self.joinState.load(ordering: .acquiring) == JoinState.joinable.rawValue, handle != 0 {
            SpindleThread.unjoinedReleases.add(1, ordering: .relaxed)
            _ = pthread_detach(pthread_t(handle))
            SpindleDiagnostics.report(.threadReleasedWithoutJoin(name: self.name))
        }
    }

    // MARK: - Spawning

    /// The smallest stack Spindle asks for: PTHREAD_STACK_MIN rounded up to whole pages.
    public static var minimumStackSize: Int {
        let page = max(sysconf(Int32(_SC_PAGESIZE)), 4096)
        let minimum = Int(cshim_stack_min())
        return (minimum + page - 1) / page * page
    }

    /// Starts a detached thread running `body`. It cleans up after itself when `body` returns.
    ///
    /// - Parameters:
    ///   - name: the thread's name, cut to 15 bytes on a UTF-8 boundary (Linux's limit).
    ///   - stackSize: bytes; nil keeps the default; below `minimumStackSize` is rounded up (never fails).
    ///   - priority: 0…1 (clamped), 0.5 is the default nice value; see `priority`.
    /// - Throws: `SpindleError.system` when pthread_create fails (EAGAIN: out of threads or memory).
    @discardableResult
    public static func detach(name: String = "spindle", stackSize: Int? = nil, priority: Double = 0.5,
                              _ body: @escaping @Sendable () -> Void) throws(SpindleError) -> SpindleThread {
        try spawn(name: name, stackSize: stackSize, priority: priority, detached: true, body: body, entry: nil)
    }

    /// Starts a detached thread that runs `entry.runOnSpawnedThread()`: `detach` without a closure to allocate (a
    /// concurrent operation's start). Default stack size and priority. Throws as `detach`.
    static func detach(name: String, entry: any SpawnedThreadEntry) throws(SpindleError) {
        _ = try spawn(name: name, stackSize: nil, priority: 0.5, detached: true, body: nil, entry: entry)
    }

    /// Starts a joinable thread running `body`. Call `join()` on the result exactly once.
    /// Parameters and errors as for `detach`.
    public static func spawnJoinable(name: String = "spindle", stackSize: Int? = nil, priority: Double = 0.5,
                                     _ body: @escaping @Sendable () -> Void) throws(SpindleError) -> SpindleThread {
        try spawn(name: name, stackSize: stackSize, priority: priority, detached: false, body: body, entry: nil)
    }

    private static func spawn(name: String, stackSize: Int?, priority: Double, detached: Bool,
                              body: (() -> Void)?, entry: (any SpawnedThreadEntry)?) throws(SpindleError)
        -> SpindleThread
    {
        let cutName = truncatedName(name)
        let clamped = clampPriority(priority)
        var size = 0
        if let stackSize {
            let page = max(sysconf(Int32(_SC_PAGESIZE)), 4096)
            let (padded, overflow) = max(stackSize, minimumStackSize).addingReportingOverflow(page - 1)
            // A size so large it cannot be rounded cannot be allocated either: report it as pthread would.
            if overflow { throw .system(function: "pthread_attr_setstacksize", errno: EINVAL) }
            size = padded / page * page
        }
        // The object exists before the thread runs (it is `current` there); the handle is stored once known. Its
        // thread context is made here too and handed over retained: the new thread installs it as it is.
        let thread = SpindleThread(name: cutName, priority: clamped, detached: detached)
        thread.startBody = body
        thread.startEntry = entry
        let context = Unmanaged.passRetained(ThreadContext(spawned: thread))
        var handle = pthread_t()
        liveSpawned.add(1, ordering: .relaxed)
        let err = cshim_pthread_create(&handle, detached ? 1 : 0, size, spindleThreadEntry, context.toOpaque())
        if err != 0 {
            liveSpawned.subtract(1, ordering: .relaxed)
            thread.startBody = nil  // the body's captures go now, not with the thread object
            thread.startEntry = nil
            context.release()
            thread.joinState.store(JoinState.detached.rawValue, ordering: .relaxed)  // nothing to join
            throw .system(function: "pthread_create", errno: err)
        }
        thread.handleStorage.store(UInt(handle), ordering: .releasing)
        return thread
    }

    /// Runs on the new thread, its context already installed: publish identity, apply name and priority, run the
    /// body, clean up.
    fileprivate func runSpawned() {
        let tid = cshim_gettid()
        let me = pthread_self()
        self.kernelLock.lock()
        self.handleStorage.store(UInt(me), ordering: .releasing)
        self.tidStorage.store(tid, ordering: .releasing)
        self.lifecycle.store(Lifecycle.running.rawValue, ordering: .releasing)
        let name = self.name
        if !name.isEmpty { _ = name.withCString { cshim_pthread_setname_np(me, $0) } }
        // Always set our own nice value: a new thread inherits its creator's, which may not be ours.
        let wanted = SpindleThread.niceValue(forPriority: self.priority)
        if cshim_getpriority_thread(tid) != wanted { _ = cshim_setpriority_thread(tid, wanted) }
        self.kernelLock.unlock()
        if let entry = self.startEntry {
            self.startEntry = nil
            entry.runOnSpawnedThread()
        } else if let body = self.startBody {
            self.startBody = nil  // the captures are released when the body returns
            body()
        }
        self.kernelLock.lock()
        self.lifecycle.store(Lifecycle.exited.rawValue, ordering: .releasing)
        self.kernelLock.unlock()
        SpindleThread.liveSpawned.subtract(1, ordering: .releasing)
        // The thread context keeps `self` alive until its thread-local destructor runs at thread exit.
    }

    /// Runs `body` with `kernelLock` held.
    private func withKernelLock<T>(_ body: () -> T) -> T {
        self.kernelLock.lock()
        defer { self.kernelLock.unlock() }
        return body()
    }

    // MARK: - Joining

    /// Waits for a joinable thread to end. Throws if the thread is detached, was already joined, or is the
    /// calling thread; nothing changes then.
    public func join() throws(SpindleError) {
        let name = self.name
        if self.isMain || self.joinState.load(ordering: .acquiring) == JoinState.detached.rawValue {
            throw .threadNotJoinable(name: name)
        }
        if self === ThreadContext.knownThread { throw .joinSelf(name: name) }
        let (exchanged, original) = self.joinState.compareExchange(
            expected: JoinState.joinable.rawValue, desired: JoinState.joined.rawValue, ordering: .acquiringAndReleasing)
        if !exchanged {
            if original == JoinState.detached.rawValue { throw .threadNotJoinable(name: name) }
            throw .threadAlreadyJoined(name: name)
        }
        checkPthread(pthread_join(pthread_t(self.handleStorage.load(ordering: .acquiring)), nil), "pthread_join")
    }

    /// Detaches a joinable thread instead of joining it: for a thread that must let itself go (a queue worker
    /// that performs its queue's shutdown). Does nothing if it was joined or detached already.
    func relinquish() {
        let (exchanged, _) = self.joinState.compareExchange(
            expected: JoinState.joinable.rawValue, desired: JoinState.detached.rawValue, ordering: .acquiringAndReleasing)
        if exchanged { checkPthread(pthread_detach(pthread_t(self.handleStorage.load(ordering: .acquiring))), "pthread_detach") }
    }

    // MARK: - State, name and priority

    /// The kernel thread id (0 until the thread has started running).
    public var threadID: Int32 { self.tidStorage.load(ordering: .acquiring) }

    /// Whether the thread's body is running.
    public var isExecuting: Bool { self.lifecycle.load(ordering: .acquiring) == Lifecycle.running.rawValue }

    /// Whether the thread's body has returned.
    public var isFinished: Bool { self.lifecycle.load(ordering: .acquiring) == Lifecycle.exited.rawValue }

    /// The thread's name: at most 15 bytes, cut on a UTF-8 boundary. Readable and settable from any thread.
    /// Setting it also renames the thread in the kernel (a spawned thread not yet running takes the name as it
    /// starts), except when the kernel refuses (EPERM in some containers: ignored), on a thread that has exited,
    /// and on a thread Spindle did not spawn, other than the main thread, set from another thread (only that
    /// thread renames itself there); in those cases only the stored value changes.
    public var name: String {
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
    /// process's needs CAP_SYS_NICE, and then the kernel keeps its old value (the call reports false).
    public var priority: Double { Double(bitPattern: self.priorityBits.load(ordering: .relaxed)) }

    /// Sets `priority` (see there). Returns whether the kernel accepted the new nice value.
    @discardableResult
    public func setPriority(_ value: Double) -> Bool {
        let clamped = SpindleThread.clampPriority(value)
        return self.withKernelLock {  // see `name`: the same rule for the nice value
            self.priorityBits.store(clamped.bitPattern, ordering: .relaxed)
            let tid = self.threadID
            guard tid != 0, !self.isFinished else { return false }
            if self.isAdopted && ThreadContext.knownThread !== self { return false }
            return SpindleThread.applyNice(forPriority: clamped, tid: tid)
        }
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

/// What a Spindle thread can run instead of a closure (see `SpindleThread.detach(name:entry:)`).
protocol SpawnedThreadEntry: AnyObject {
    /// Runs on the new thread once its start-up is done (name and priority applied); the thread ends after it.
    func runOnSpawnedThread()
}

/// The C entry point of every Spindle thread: installs the thread context the spawner passed retained (its
/// thread-local key takes over that reference) and runs the thread.
private func spindleThreadEntry(_ context: UnsafeMutableRawPointer?) {
    ThreadContext.installSpawned(context!).thread.runSpawned()
}
