import Glibc
import Testing

@_spi(Faults) import Spindle

// NSThread's life for SpindleThread (issue 19): made unstarted, configured, started once, cancelled. Oracles are
// the kernel's (/proc for name and nice value, glibc's pthread_getattr_np for the stack) and POSIX semaphores.

@Suite("SpindleThread lifecycle", .timeLimit(.minutes(2)))
struct ThreadLifecycleTests {
    @Test("made unstarted, configured, then started: name, priority and stack size are in place before the body")
    func createConfigureStart() throws {
        struct Seen: Sendable {
            var comm: String?, nice: Int?, stack: Int?, isCurrent = false, executing = false, cancelled = true
        }
        let seen = SpindleLockedValue(Seen())
        let started = OracleSemaphore(), gate = OracleSemaphore()
        let thread = SpindleThread(name: "configured-name-too-long") { me in
            // First thing the body does: read what the kernel has for this thread.
            let tid = kernelThreadID()
            seen.withLockedValue {
                $0 = Seen(comm: readComm(tid: tid), nice: procNice(tid: tid), stack: currentStackSize(),
                          isCurrent: SpindleThread.current === me, executing: me.isExecuting,
                          cancelled: me.isCancelled)
            }
            started.post()
            _ = gate.wait()
        }
        #expect(!thread.isExecuting && !thread.isFinished && !thread.isCancelled)
        #expect(thread.threadID == 0 && thread.stackSize == nil && thread.priority == 0.5)
        #expect(thread.name == "configured-name")  // cut to 15 bytes at init
        thread.name = "renamed-first"
        #expect(thread.setPriority(0.25) == false, "nothing to apply to yet: stored for the start")
        #expect(thread.priority == 0.25)
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        try thread.setStackSize((1 << 20) + 1)
        #expect(thread.stackSize == (1 << 20) + page)  // rounded up to whole pages
        try thread.startJoinable()
        #expect(started.wait())
        #expect(thread.isExecuting && !thread.isFinished && thread.threadID > 0)
        gate.post()
        try thread.join()
        #expect(thread.isFinished && !thread.isExecuting && !thread.isCancelled)
        let result = seen.value
        #expect(result.comm == "renamed-first")
        #expect(result.nice == 10)  // priority 0.25
        #expect(stackFits(result.stack, requested: (1 << 20) + page))
        #expect(result.isCurrent && result.executing && !result.cancelled)
    }

    @Test("init(name:block:): SpindleThread.current inside the block is the object; start() is detached")
    func blockSeesItsObject() throws {
        let identity = SpindleLockedValue<ObjectIdentifier?>(nil)
        let selfJoin = SpindleLockedValue("")
        let ran = OracleSemaphore()
        let thread = SpindleThread(name: "block-form") {
            identity.withLockedValue { $0 = ObjectIdentifier(SpindleThread.current) }
            do throws(SpindleError) {  // at once, maybe before start() has returned: detached all the same
                try SpindleThread.current.join()
            } catch {
                selfJoin.withLockedValue { $0 = error.description }
            }
            ran.post()
        }
        try thread.start()
        #expect(ran.wait())
        #expect(identity.value == ObjectIdentifier(thread))
        #expect(selfJoin.value == SpindleError.threadNotJoinable(name: "block-form").description)
        expectSpindleError(.threadNotJoinable(name: "block-form")) { try thread.join() }
    }

    @Test("a subclass overriding main() and cancel(): main runs on the new thread, current is the subclass object")
    func subclassOverridingMain() throws {
        final class Waiter: SpindleThread, @unchecked Sendable {
            let wake = OracleSemaphore(), started = OracleSemaphore()
            let report = SpindleLockedValue<[String]>([])
            override func main() {
                let me = SpindleThread.current as? Waiter
                self.report.withLockedValue { $0.append(me === self ? "current is self" : "current is another") }
                self.started.post()
                _ = self.wake.wait()  // until cancel() wakes it
                self.report.withLockedValue { $0.append(self.isCancelled ? "cancelled" : "woken, not cancelled") }
            }
            override func cancel() {
                super.cancel()
                self.wake.post()
            }
        }
        let waiter = Waiter(name: "waiter")
        try waiter.startJoinable()
        #expect(waiter.started.wait())
        waiter.cancel()
        try waiter.join()
        #expect(waiter.report.value == ["current is self", "cancelled"])
        #expect(waiter.isFinished && waiter.isCancelled)
    }

    @Test("a subclass made with a block runs it through super.main()")
    func subclassCallingSuperMain() throws {
        final class Wrapper: SpindleThread, @unchecked Sendable {
            let order = SpindleLockedValue<[String]>([])
            override func main() {
                self.order.withLockedValue { $0.append("before") }
                super.main()
                self.order.withLockedValue { $0.append("after") }
            }
        }
        let wrapper = Wrapper(name: "wrapper") { me in (me as? Wrapper)?.order.withLockedValue { $0.append("block") } }
        try wrapper.startJoinable()
        try wrapper.join()
        #expect(wrapper.order.value == ["before", "block", "after"])
    }

    @Test("a thread cancelled before its start never runs: finished and cancelled, body released, no pthread",
          arguments: [false, true])
    func cancelBeforeStart(joinable: Bool) throws {
        let ran = SpindleLockedValue(false)
        let released = OracleSemaphore()
        let thread = Self.unstarted(ran: ran, released: released)
        thread.cancel()
        #expect(thread.isCancelled && !thread.isFinished)
        if joinable { try thread.startJoinable() } else { try thread.start() }
        #expect(thread.isFinished && thread.isCancelled && !thread.isExecuting)
        #expect(released.wait(seconds: 0), "the body of a thread that never ran was kept")
        #expect(thread.threadID == 0, "a pthread was made for a cancelled thread")
        if joinable {
            try thread.join()  // nothing to wait for
            expectSpindleError(.threadAlreadyJoined(name: "cancelled")) { try thread.join() }
        } else {
            expectSpindleError(.threadNotJoinable(name: "cancelled")) { try thread.join() }
        }
        expectSpindleError(.threadAlreadyStarted(name: "cancelled")) { try thread.start() }
        #expect(!ran.value)
    }

    @Test("cancel() after the start: the running body sees isCancelled and returns")
    func cancelAfterStart() throws {
        let started = OracleSemaphore()
        let sawCancel = SpindleLockedValue(false)
        let thread = SpindleThread(name: "poller") { me in
            started.post()
            let end = monotonicSeconds() + 10  // a failure detector, not a timing assumption
            while !me.isCancelled && monotonicSeconds() < end { sched_yield() }
            sawCancel.withLockedValue { $0 = SpindleThread.current.isCancelled }
        }
        try thread.startJoinable()
        #expect(started.wait())
        #expect(!thread.isCancelled)
        thread.cancel()
        thread.cancel()  // again: no effect
        try thread.join()
        #expect(sawCancel.value)
        #expect(thread.isFinished && thread.isCancelled)
    }

    @Test("misuse throws and changes nothing: start twice, stack size after start, join before start")
    func misuse() throws {
        let gate = OracleSemaphore(), started = OracleSemaphore()
        let thread = SpindleThread(name: "once") {
            started.post()
            _ = gate.wait()
        }
        expectSpindleError(.threadNotStarted(name: "once")) { try thread.join() }
        try thread.setStackSize(1)  // below the minimum: rounded up
        #expect(thread.stackSize == SpindleThread.minimumStackSize)
        try thread.startJoinable()
        #expect(started.wait())
        expectSpindleError(.threadAlreadyStarted(name: "once")) { try thread.start() }
        expectSpindleError(.threadAlreadyStarted(name: "once")) { try thread.startJoinable() }
        expectSpindleError(.threadStackSizeFixed(name: "once")) { try thread.setStackSize(1 << 20) }
        #expect(thread.stackSize == SpindleThread.minimumStackSize)
        #expect(thread.isExecuting && !thread.isCancelled)
        gate.post()
        try thread.join()  // still joinable: the failed calls changed nothing
        expectSpindleError(.threadAlreadyStarted(name: "once")) { try thread.startJoinable() }
        // Threads that were running from the start cannot be started either.
        let main = SpindleThread.main, here = SpindleThread.current
        expectSpindleError(.threadAlreadyStarted(name: main.name)) { try main.start() }
        expectSpindleError(.threadAlreadyStarted(name: here.name)) { try here.start() }
        expectSpindleError(.threadStackSizeFixed(name: here.name)) { try here.setStackSize(nil) }
        let spawned = try SpindleThread.spawnJoinable(name: "spawned") {}
        expectSpindleError(.threadAlreadyStarted(name: "spawned")) { try spawned.start() }
        try spawned.join()
        // A size too large to round is refused before anything changes.
        let big = SpindleThread(name: "big")
        expectSpindleError(.system(function: "pthread_attr_setstacksize", errno: EINVAL)) {
            try big.setStackSize(Int.max)
        }
        #expect(big.stackSize == nil)
    }

    @Test("starts racing each other and setStackSize: one start wins, the stack is the one in force at the claim")
    func racingStarts() throws {
        // Far apart, so that a stack glibc reuses for one (up to 4 times the size) can never pass for the other.
        let before = 256 * 1024, after = 4 * 1024 * 1024
        for round in 0..<10 {
            let runs = SpindleLockedValue(0)
            let stack = SpindleLockedValue<Int?>(nil)
            let thread = SpindleThread(name: "raced") { _ in
                stack.withLockedValue { $0 = currentStackSize() }
                runs.withLockedValue { $0 += 1 }
            }
            try thread.setStackSize(before)
            let outcomes = SpindleLockedValue<[String]>([])
            let go = OracleSemaphore()
            let contenders = try (0..<3).map { index in
                try SpindleThread.spawnJoinable(name: "contender") {
                    _ = go.wait()
                    do throws(SpindleError) {
                        if index == 2 {
                            try thread.setStackSize(after)
                            outcomes.withLockedValue { $0.append("resized") }
                        } else {
                            try thread.startJoinable()
                            outcomes.withLockedValue { $0.append("started") }
                        }
                    } catch {
                        outcomes.withLockedValue { $0.append(error.description) }
                    }
                }
            }
            for _ in contenders { go.post() }
            for contender in contenders { try contender.join() }
            try thread.join()
            let seen = outcomes.value
            #expect(seen.filter { $0 == "started" }.count == 1, "round \(round): \(seen)")
            #expect(seen.contains(SpindleError.threadAlreadyStarted(name: "raced").description), "round \(round)")
            #expect(runs.value == 1)
            let resized = seen.contains("resized")
            #expect(resized || seen.contains(SpindleError.threadStackSizeFixed(name: "raced").description))
            #expect(thread.stackSize == (resized ? after : before))
            #expect(stackFits(stack.value, requested: resized ? after : before), "round \(round): \(seen)")
        }
    }

    @Test("a failed pthread_create throws, leaves the thread unstarted with its body, and a later start runs it")
    func failedStartIsRetried() async {
        // A process of its own: the fault seam's schedules are process-wide, and FaultSeamTests sets them too.
        await #expect(processExitsWith: .success) {
            let released = OracleSemaphore(), ran = OracleSemaphore()
            let eagain = SpindleError.system(function: "pthread_create", errno: EAGAIN).description
            do {
                let thread = threadHolding(ReleaseSentinel(released), name: "retried", ran: ran)
                SpindleFaults.inject(.threadCreate, .next(1), onlyOnThisThread: true)
                do throws(SpindleError) {
                    try thread.start()
                    exit(2)
                } catch {
                    guard error.description == eagain else { exit(3) }
                }
                guard SpindleFaults.injected(.threadCreate) == 1 else { exit(4) }
                guard !thread.isExecuting, !thread.isFinished, thread.threadID == 0 else { exit(5) }
                guard !ran.wait(seconds: 0), !released.wait(seconds: 0) else { exit(6) }  // kept, not run
                do throws(SpindleError) {
                    try thread.join()
                    exit(7)
                } catch {
                    guard error.description == SpindleError.threadNotStarted(name: "retried").description else {
                        exit(7)
                    }
                }
                guard (try? thread.setStackSize(1 << 20)) != nil, thread.stackSize == 1 << 20 else { exit(8) }
                do { try thread.startJoinable() } catch { exit(9) }  // startable again
                guard ran.wait() else { exit(10) }
                do { try thread.join() } catch { exit(11) }
                guard released.wait(seconds: 0) else { exit(12) }  // released before join() returned
            }
            // One whose start failed and that is never started again releases its body with the object.
            let dropped = OracleSemaphore()
            do {
                let sentinel = ReleaseSentinel(dropped)
                let thread = SpindleThread(name: "dropped") { withExtendedLifetime(sentinel) {} }
                SpindleFaults.inject(.threadCreate, .next(1), onlyOnThisThread: true)
                guard (try? thread.startJoinable()) == nil else { exit(13) }
                guard !dropped.wait(seconds: 0) else { exit(14) }
            }
            guard dropped.wait() else { exit(15) }
            SpindleFaults.reset()
            guard SpindleThread.liveSpawnedCount == 0, SpindleThread.unjoinedReleaseCount == 0 else { exit(16) }
            exit(0)
        }
    }

    /// An unstarted thread named "cancelled" whose body would set `ran` and whose release posts `released`.
    private static func unstarted(ran: SpindleLockedValue<Bool>, released: OracleSemaphore) -> SpindleThread {
        let sentinel = ReleaseSentinel(released)
        return SpindleThread(name: "cancelled") { withExtendedLifetime(sentinel) { ran.withLockedValue { $0 = true } } }
    }
}

/// Tests that watch their threads leave /proc (serialized among themselves, as `ThreadLifetimeTests`).
@Suite("SpindleThread lifecycle lifetimes", .serialized, .timeLimit(.minutes(2)))
struct ThreadLifecycleLifetimeTests {
    @Test("started threads release their body's captures and their object, and leave /proc/self/task",
          arguments: [false, true])
    func nothingLeftBehind(joinable: Bool) throws {
        let released = OracleSemaphore()
        let (tid, weak) = try Self.startCapturing(ReleaseSentinel(released), joinable: joinable)
        #expect(released.wait(), "the body's captures were not released")
        #expect(waitUntil(deadline: 10) { !taskExists(tid: tid) })
        #expect(weak.value == nil, "the SpindleThread of an ended thread is still alive")
    }

    @Test("an unstarted thread dropped without a start releases its body")
    func unstartedReleasesBody() {
        let released = OracleSemaphore()
        do {
            let sentinel = ReleaseSentinel(released)
            let thread = SpindleThread(name: "never") { withExtendedLifetime(sentinel) {} }
            #expect(!thread.isFinished)
        }
        #expect(released.wait())
    }

    private final class WeakThread: @unchecked Sendable { weak var value: SpindleThread? }

    private static func startCapturing(_ sentinel: ReleaseSentinel, joinable: Bool) throws -> (Int32, WeakThread) {
        let started = OracleSemaphore()
        let thread = SpindleThread(name: "leaving") { withExtendedLifetime(sentinel) { started.post() } }
        if joinable { try thread.startJoinable() } else { try thread.start() }
        #expect(started.wait())
        let tid = thread.threadID
        if joinable { try thread.join() }
        let weak = WeakThread()
        weak.value = thread
        return (tid, weak)
    }
}

/// An unstarted thread whose body posts `ran`; its captures (`sentinel`) are held by nothing else.
func threadHolding(_ sentinel: ReleaseSentinel, name: String, ran: OracleSemaphore) -> SpindleThread {
    SpindleThread(name: name) { _ in withExtendedLifetime(sentinel) { ran.post() } }
}

/// Whether a thread that asked for `requested` bytes of stack got them: glibc hands out at least the size asked
/// for, from a fresh mapping or from its cache of freed stacks, where it takes one only if its block (stack and
/// guard) is at most 4 times the block asked for (allocatestack.c); the 64 KiB allow for guard pages. So a thread
/// left at the default size (RLIMIT_STACK, usually 8 MiB) cannot pass for one given 1 MiB, nor 1 MiB for 4 MiB.
func stackFits(_ actual: Int?, requested: Int) -> Bool {
    guard let actual else { return false }
    return actual >= requested && actual <= 4 * requested + 64 * 1024
}

/// The nice value of thread `tid`, field 19 of /proc/self/task/<tid>/stat (after the parenthesised name).
func procNice(tid: Int32) -> Int? {
    guard let bytes = readProcBytes("/proc/self/task/\(tid)/stat") else { return nil }
    let text = String(decoding: bytes, as: UTF8.self)
    guard let close = text.lastIndex(of: ")") else { return nil }
    let fields = text[text.index(after: close)...].split(separator: " ")  // fields[0] is field 3
    return fields.count > 16 ? Int(fields[16]) : nil
}

/// The calling thread's stack size as glibc has it (`pthread_getattr_np`, looked up at run time: Swift's Glibc
/// module does not export it).
func currentStackSize() -> Int? {
    typealias GetAttr = @convention(c) (pthread_t, UnsafeMutablePointer<pthread_attr_t>) -> Int32
    guard let symbol = dlsym(nil, "pthread_getattr_np") else { return nil }
    let getattr = unsafeBitCast(symbol, to: GetAttr.self)
    var attr = pthread_attr_t()
    guard getattr(pthread_self(), &attr) == 0 else { return nil }
    defer { pthread_attr_destroy(&attr) }
    var size = 0
    guard pthread_attr_getstacksize(&attr, &size) == 0 else { return nil }
    return size
}
