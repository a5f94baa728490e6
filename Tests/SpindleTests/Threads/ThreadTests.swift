import CShim
import Glibc
import Spindle
import Testing

@Suite("SpindleThread", .timeLimit(.minutes(2)))
struct ThreadTests {
    @Test("detach and spawnJoinable run their body")
    func bodiesRun() throws {
        let ran = OracleSemaphore()
        try SpindleThread.detach { ran.post() }
        #expect(ran.wait(), "the detached body did not run")
        let flag = SpindleLockedValue(false)
        let thread = try SpindleThread.spawnJoinable { flag.withLockedValue { $0 = true } }
        try thread.join()
        #expect(flag.value)
        #expect(thread.isFinished && !thread.isExecuting)
    }

    @Test("join misuse throws: twice, a detached thread, the main thread, an adopted thread")
    func joinMisuse() throws {
        let twice = try SpindleThread.spawnJoinable(name: "twice") {}
        try twice.join()
        expectSpindleError(.threadAlreadyJoined(name: "twice")) { try twice.join() }
        let gate = OracleSemaphore()
        let detached = try SpindleThread.detach(name: "detached") { _ = gate.wait() }
        expectSpindleError(.threadNotJoinable(name: "detached")) { try detached.join() }
        gate.post()
        expectSpindleError(.threadNotJoinable(name: SpindleThread.main.name)) { try SpindleThread.main.join() }
        let adopted = SpindleThread.current  // the test runner's thread (unless it is the main thread)
        expectSpindleError(.threadNotJoinable(name: adopted.name)) { try adopted.join() }
    }

    @Test("a thread joining itself gets joinSelf; it can still be joined afterwards")
    func joinSelf() throws {
        let thrown = SpindleLockedValue<String?>(nil)
        let thread = try SpindleThread.spawnJoinable(name: "selfjoin") {
            do throws(SpindleError) {
                try SpindleThread.current.join()
            } catch {
                thrown.withLockedValue { $0 = error.description }
            }
        }
        try thread.join()  // the failed self-join changed nothing
        #expect(thrown.value == SpindleError.joinSelf(name: "selfjoin").description)
    }

    @Test("current is one object per thread, distinct across threads, and is the spawned object")
    func currentIdentity() throws {
        let identities = SpindleLockedValue<[Int: ObjectIdentifier]>([:])
        let stable = SpindleLockedValue(true)
        let gate = OracleSemaphore()
        let threads = try (0..<3).map { index in
            try SpindleThread.spawnJoinable(name: "current-\(index)") {
                let first = SpindleThread.current
                let same = (0..<100).allSatisfy { _ in SpindleThread.current === first }
                let tidOK = first.threadID == kernelThreadID()
                stable.withLockedValue { $0 = $0 && same && tidOK && !first.isMain && first.isExecuting }
                identities.withLockedValue { $0[index] = ObjectIdentifier(first) }
                _ = gate.wait()  // keep all three alive together
            }
        }
        for _ in threads { gate.post() }
        for thread in threads { try thread.join() }
        #expect(stable.value)
        let seen = identities.value
        for (index, thread) in threads.enumerated() { #expect(seen[index] == ObjectIdentifier(thread)) }
        #expect(Set(seen.values).count == 3)
        // The test runner's thread is not a Spindle thread: it is adopted, also stable.
        let here = SpindleThread.current
        #expect(here === SpindleThread.current)
        #expect(!threads.contains { $0 === here })
    }

    @Test("isMainThread agrees with current === main and with gettid() == getpid()")
    func mainThread() throws {
        #expect(SpindleThread.isMainThread == (SpindleThread.current === SpindleThread.main))
        #expect(SpindleThread.isMainThread == (kernelThreadID() == getpid()))
        #expect(SpindleThread.main.isMain && SpindleThread.main.threadID == getpid())
        let onSpawned = SpindleLockedValue<[Bool]>([])
        try runJoinableThreads(1) { _ in
            onSpawned.withLockedValue {
                $0 = [SpindleThread.isMainThread, SpindleThread.current === SpindleThread.main,
                      SpindleThread.current.isMain]
            }
        }
        #expect(onSpawned.value == [false, false, false])
    }

    @Test("names reach the kernel cut to 15 bytes on a UTF-8 boundary", arguments: [
        ("a", "a"),
        ("fifteen-bytes-x", "fifteen-bytes-x"),
        ("sixteen-bytes-xy", "sixteen-bytes-x"),
        (String(repeating: "0123456789abcdef", count: 4), "0123456789abcde"),
        ("поток-номер-один", "поток-но"),  // Cyrillic letters are 2 bytes: 15 would split one
        ("ab€€€€€", "ab€€€€"),  // 3-byte characters: 2 + 4*3 = 14 bytes fit, a fifth would not
        ("a\u{0}b", "ab"),  // NUL cannot reach the kernel
        ("", ""),  // empty: the kernel's name too, not the one inherited from the creating thread
    ])
    func kernelNames(name: String, expected: String) throws {
        let started = OracleSemaphore()
        let gate = OracleSemaphore()
        let thread = try SpindleThread.spawnJoinable(name: name) {
            started.post()
            _ = gate.wait()
        }
        #expect(started.wait())
        #expect(SpindleThread.truncatedName(name) == expected)
        #expect(expected.utf8.count <= 15)
        let comm = try #require(readCommBytes(tid: thread.threadID))
        #expect(String(validating: comm, as: UTF8.self) == expected, "comm is not valid UTF-8 or differs")
        #expect(thread.name == expected)  // read from another thread
        gate.post()
        try thread.join()
    }

    @Test("setting a name from another thread changes the kernel's name")
    func renameFromOutside() throws {
        let started = OracleSemaphore()
        let gate = OracleSemaphore()
        let seenInside = SpindleLockedValue("")
        let thread = try SpindleThread.spawnJoinable(name: "before") {
            started.post()
            _ = gate.wait()
            seenInside.withLockedValue { $0 = SpindleThread.current.name }
        }
        #expect(started.wait())
        let tid = thread.threadID
        #expect(readComm(tid: tid) == "before")
        thread.name = "after-rename-it-is-long"
        #expect(thread.name == "after-rename-it")
        #expect(readComm(tid: tid) == "after-rename-it")
        gate.post()
        try thread.join()
        #expect(seenInside.value == "after-rename-it")
        thread.name = "exited"  // after exit only the stored value changes
        #expect(thread.name == "exited")
    }

    @Test("a stack size below the minimum is rounded up", arguments: [1, 0, 4097])
    func tinyStack(stackSize: Int) throws {
        let ran = SpindleLockedValue(false)
        let thread = try SpindleThread.spawnJoinable(name: "tiny-stack", stackSize: stackSize) {
            // Some real stack use: a recursive sum over a few frames.
            func sum(_ n: Int) -> Int { n == 0 ? 0 : n + sum(n - 1) }
            ran.withLockedValue { $0 = sum(100) == 5050 }
        }
        try thread.join()
        #expect(ran.value)
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        #expect(SpindleThread.minimumStackSize >= Int(PTHREAD_STACK_MIN))
        #expect(SpindleThread.minimumStackSize % page == 0)
    }

    @Test("priority 0 gives nice 19; setPriority reads back and reaches the kernel when allowed")
    func priority() throws {
        let started = OracleSemaphore()
        let gate = OracleSemaphore()
        let thread = try SpindleThread.spawnJoinable(name: "low-prio", priority: 0.0) {
            started.post()
            _ = gate.wait()
        }
        #expect(started.wait())
        let tid = thread.threadID
        #expect(thread.priority == 0.0)
        #expect(cshim_getpriority_thread(tid) == 19)
        let accepted = thread.setPriority(0.8)  // nice -12: needs CAP_SYS_NICE, else the kernel keeps 19
        #expect(thread.priority == 0.8)
        #expect(cshim_getpriority_thread(tid) == (accepted ? -12 : 19))
        #expect(thread.setPriority(1.0) == accepted)  // nice -20: allowed exactly when -12 was
        #expect(thread.setPriority(0.25))  // nice 10, at or above the current value: always allowed
        #expect(cshim_getpriority_thread(tid) == 10)
        gate.post()
        try thread.join()
        #expect(thread.setPriority(0.3) == false)  // exited: nothing to apply
        #expect(thread.priority == 0.3)
        #expect(thread.setPriority(7) == false && thread.priority == 1.0)  // clamped
        #expect([0, 1, 0.5, .nan].map(SpindleThread.niceValue(forPriority:)) == [19, -20, 0, 0])
    }

    @Test("a default-priority thread runs at nice 0 even when spawned by a low-priority thread")
    func defaultPriorityIsNiceZero() throws {
        let seen = SpindleLockedValue<[Int32]>([])
        let parent = try SpindleThread.spawnJoinable(name: "low-parent", priority: 0.0) {
            let child = try? SpindleThread.spawnJoinable(name: "child") {
                seen.withLockedValue { $0.append(cshim_getpriority_thread(SpindleThread.current.threadID)) }
            }
            try? child?.join()
        }
        try parent.join()
        #expect(seen.value == [0])
    }

    @Test("main's name is the main thread's even when `main` is first touched on another thread")
    func mainNameFromAnotherThread() async {
        await #expect(processExitsWith: .success) {  // a fresh process: `main` is not initialised yet
            let same = SpindleLockedValue(false)
            let probe = try? SpindleThread.spawnJoinable(name: "not-main") {
                same.withLockedValue { $0 = SpindleThread.main.name == readComm(tid: getpid()) }
            }
            try? probe?.join()
            exit(same.value ? 0 : 1)
        }
    }

    @Test("renaming the main thread from another thread reaches the kernel")
    func renameMainFromAnotherThread() async {
        await #expect(processExitsWith: .success) {  // a fresh process, so the runner's name is untouched
            let probe = try? SpindleThread.spawnJoinable(name: "renamer") { SpindleThread.main.name = "new-main" }
            try? probe?.join()
            exit(readComm(tid: getpid()) == "new-main" && SpindleThread.main.name == "new-main" ? 0 : 1)
        }
    }

    @Test("a stack size near Int.max makes spawning throw, not trap")
    func hugeStackThrows() async {
        await #expect(processExitsWith: .success) {  // an exabyte stack cannot be made: the spawn must throw
            exit((try? SpindleThread.spawnJoinable(stackSize: Int.max) {}) == nil ? 0 : 2)
        }
    }

    @Test("spindleActiveProcessorCount is between 1 and the online CPU count")
    func processorCount() {
        let count = spindleActiveProcessorCount()
        #expect(count >= 1)
        #expect(count <= sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    }
}

/// Tests that watch threads come and go in /proc. Serialized among themselves; other suites may run alongside, so
/// they never compare whole-process counts with a baseline, only the fate of their own threads' ids.
@Suite("SpindleThread lifetimes", .serialized, .timeLimit(.minutes(2)))
struct ThreadLifetimeTests {
    @Test("joined and detached threads leave /proc/self/task", arguments: [false, true])
    func threadsLeave(detached: Bool) throws {
        let count = 8
        let started = OracleSemaphore(), gate = OracleSemaphore()
        let threads = try (0..<count).map { _ in
            let body: @Sendable () -> Void = {
                started.post()
                _ = gate.wait()
            }
            return detached ? try SpindleThread.detach(name: "leaving", body)
                : try SpindleThread.spawnJoinable(name: "leaving", body)
        }
        for _ in 0..<count { #expect(started.wait()) }
        let tids = threads.map(\.threadID)
        #expect(Set(tids).count == count && tids.allSatisfy { $0 > 0 && taskExists(tid: $0) })
        #expect(threadCount() >= count + 1)
        #expect(SpindleThread.liveSpawnedCount >= count)
        #expect(threads.allSatisfy { $0.isExecuting && !$0.isFinished })
        for _ in 0..<count { gate.post() }
        if !detached { for thread in threads { try thread.join() } }
        // pthread_join returns once the kernel clears the tid; the task is unhashed a moment later, so even
        // joined threads are awaited (with a generous deadline) rather than expected gone at once.
        #expect(waitUntil(deadline: 10) { tids.allSatisfy { !taskExists(tid: $0) } })
        #expect(threads.allSatisfy { $0.isFinished && !$0.isExecuting })
    }

    @Test("a detached thread releases its body's captures and its SpindleThread when it ends")
    func detachedReleasesContext() throws {
        let released = OracleSemaphore()
        let (tid, object) = try Self.detachCapturing(ReleaseSentinel(released))
        #expect(released.wait(), "the detached body's captures were not released")
        #expect(waitUntil(deadline: 10) { !taskExists(tid: tid) })
        #expect(object.value == nil, "the SpindleThread of an ended detached thread is still alive")
    }

    @Test("a joinable thread released without join() is counted in unjoinedReleaseCount")
    func unjoinedRelease() throws {
        let before = SpindleThread.unjoinedReleaseCount
        let tid = try Self.spawnAndForget()
        #expect(waitUntil(deadline: 10) { !taskExists(tid: tid) })
        // Both references (ours, dropped on return, and the thread's own, dropped at its exit) are gone.
        #expect(SpindleThread.unjoinedReleaseCount >= before + 1)
    }

    private final class WeakThread: @unchecked Sendable { weak var value: SpindleThread? }

    private static func detachCapturing(_ sentinel: ReleaseSentinel) throws -> (Int32, WeakThread) {
        let started = OracleSemaphore()
        let thread = try SpindleThread.detach(name: "ctx") { withExtendedLifetime(sentinel) { started.post() } }
        #expect(started.wait())
        let weak = WeakThread()
        weak.value = thread
        return (thread.threadID, weak)
    }

    private static func spawnAndForget() throws -> Int32 {
        let started = OracleSemaphore()
        let thread = try SpindleThread.spawnJoinable(name: "forgotten") { started.post() }
        #expect(started.wait())
        return thread.threadID
    }
}
