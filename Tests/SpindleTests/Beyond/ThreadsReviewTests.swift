import CShim
import Glibc
import Synchronization
import Testing

@testable import Spindle

// Review of Threads/, Diagnostics/, SpindleThreadLocal and CShim: each test below failed on the code it was
// written against (see the report for the output seen).

/// A thread-local value that, as it is released at its thread's exit, records what `SpindleThread.current` is there.
final class TRCurrentProbe: @unchecked Sendable {
    let expected: SpindleThread
    let outcome: SpindleLockedValue<(same: Bool, cancelled: Bool, name: String)?>
    init(expected: SpindleThread, outcome: SpindleLockedValue<(same: Bool, cancelled: Bool, name: String)?>) {
        (self.expected, self.outcome) = (expected, outcome)
    }
    deinit {
        let current = SpindleThread.current
        let seen = (same: current === self.expected, cancelled: current.isCancelled, name: current.name)
        self.outcome.withLockedValue { $0 = seen }
    }
}

/// A process-lifetime thread-local (as `SpindleThreadLocal` asks: keep it alive as long as the threads using it).
let trProbeLocal = SpindleThreadLocal<TRCurrentProbe?>(initial: { nil })

/// A thread-local value that, released at its thread's exit, joins that thread (a misuse: it must throw `joinSelf`).
final class TRSelfJoiner: @unchecked Sendable {
    let thread: SpindleThread
    let outcome: SpindleLockedValue<String>
    let done: OracleSemaphore
    init(thread: SpindleThread, outcome: SpindleLockedValue<String>, done: OracleSemaphore) {
        (self.thread, self.outcome, self.done) = (thread, outcome, done)
    }
    deinit {
        var seen = "returned"
        do { try self.thread.join() } catch .joinSelf { seen = "joinSelf" } catch { seen = "\(error)" }
        self.outcome.withLockedValue { $0 = seen }
        self.done.post()
    }
}

let trJoinLocal = SpindleThreadLocal<TRSelfJoiner?>(initial: { nil })

/// Stack sizes no other thread of the test process asks for, so that glibc's stack cache hands a forked child's new
/// thread exactly the descriptor of the parent's thread made with the same size.
private func trUnusualStackSize(pages: Int) -> Int { SpindleThread.minimumStackSize + pages * 4096 }

@Suite("Review: threads, thread-locals and fork", .serialized, .timeLimit(.minutes(2)))
struct ThreadsReviewTests {
    /// `SpindleThreadLocal`'s key is made after `ThreadContext`'s (`init` calls `ThreadContext.makeKey()` first), and
    /// glibc runs key destructors in key order: so at a thread's exit its context (and with it its `SpindleThread`)
    /// is gone before any thread-local value is released. A value's deinit that asks for `SpindleThread.current`
    /// gets a brand-new "adopted" object: not the thread's own, not cancelled, though the thread was.
    @Test("a thread-local value released at thread exit still sees the thread's own SpindleThread.current")
    func threadLocalDeinitSeesCurrentThread() throws {
        let outcome = SpindleLockedValue<(same: Bool, cancelled: Bool, name: String)?>(nil)
        let thread = SpindleThread(name: "tr-tls") { me in
            me.cancel()
            trProbeLocal.value = TRCurrentProbe(expected: me, outcome: outcome)
        }
        try thread.startJoinable()
        try thread.join()  // pthread_join returns after the thread's key destructors ran
        let seen = outcome.value
        #expect(seen != nil, "the thread-local value was not released at thread exit")
        #expect(seen?.same == true,
                "SpindleThread.current in a thread-local's deinit at thread exit is not the thread's own object (\(String(describing: seen)))")
        #expect(seen?.cancelled == true, "SpindleThread.current there does not report the thread's cancellation")
    }

    /// A thread started in the parent keeps its (parent's) pthread handle in the child, where glibc has marked its
    /// descriptor free and put its stack in the cache: the child's next thread of the same stack size gets the very
    /// same descriptor, hence the same `pthread_t`. `name`'s setter checks only `isFinished` (never the fork
    /// generation, unlike `threadID`/`setPriority`), so renaming the parent's thread renames the child's thread.
    @Test("in a forked child, renaming a thread of the parent does not rename a thread of the child",
          .disabled(if: forkTestsUnderThreadSanitizer, "children of a busy process hang under ThreadSanitizer"))
    func renameParentThreadInChild() throws {
        let stack = trUnusualStackSize(pages: 37)
        let release = QTGate()
        let parentThread = try SpindleThread.spawnJoinable(name: "tr-parent", stackSize: stack) { _ = release.wait() }
        #expect(waitUntil(deadline: qtDeadline) { parentThread.isExecuting })
        let code = forkChildAndWait(alarmSeconds: 5) {
            let childGate = QTGate()
            guard let own = try? SpindleThread.spawnJoinable(name: "tr-child", stackSize: stack, { _ = childGate.wait(seconds: 4) })
            else { return 100 }
            guard waitUntil(deadline: 3, { own.isExecuting }) else { return 101 }
            var bits: Int32 = 0
            if own.handleStorage.load(ordering: .relaxed) == parentThread.handleStorage.load(ordering: .relaxed) {
                bits |= 4  // the child's thread got the parent thread's descriptor (informative)
            }
            parentThread.name = "tr-hijacked"  // a thread of the parent: only the stored name may change
            if readComm(tid: own.threadID) != "tr-child" { bits |= 1 }
            childGate.open()
            do { try own.join() } catch { bits |= 2 }
            return bits
        }
        release.open()
        try parentThread.join()
        #expect(code & 3 == 0,
                "child exit code \(code): renaming the parent's thread in the child renamed the child's own thread (bit 1), or joining it failed (bit 2); bit 4 = same pthread_t")
    }

    /// The same stale handle, reached by the deinit of a joinable parent thread that had ended but was not joined:
    /// released in the child (nothing there is a misuse: an unjoined joinable thread is reported and detached), it
    /// `pthread_detach`es the handle, which in the child names the child's own joinable thread; joining that one
    /// then traps in `checkPthread` (pthread_join: EINVAL).
    @Test("in a forked child, releasing an unjoined thread of the parent does not detach a thread of the child",
          .disabled(if: forkTestsUnderThreadSanitizer, "children of a busy process hang under ThreadSanitizer"))
    func releaseUnjoinedParentThreadInChild() throws {
        let stack = trUnusualStackSize(pages: 41)
        let box = UnguardedBox<SpindleThread?>(try SpindleThread.spawnJoinable(name: "tr-ended", stackSize: stack) {})
        #expect(waitUntil(deadline: qtDeadline) { box.value!.isFinished })
        let tid = box.value!.threadID
        #expect(waitUntil(deadline: qtDeadline) { !taskExists(tid: tid) })  // ended, not joined yet
        let code = forkChildAndWait(alarmSeconds: 5) {
            let childGate = QTGate()
            guard let own = try? SpindleThread.spawnJoinable(name: "tr-child2", stackSize: stack, { _ = childGate.wait(seconds: 4) })
            else { return 100 }
            guard waitUntil(deadline: 3, { own.isExecuting }) else { return 101 }
            box.value = nil  // the child's copy of the parent's last reference: deinit runs here
            childGate.open()
            do { try own.join() } catch { return 2 }  // traps (checkPthread) if `own` was detached
            return 0
        }
        try box.value!.join()
        #expect(code == 0,
                "child exit code \(code) (-4/-5 = trapped): releasing the parent's unjoined thread in the child detached the child's own thread, whose join then failed")
    }

    /// `setPriority` on a thread of the parent returns false in a child (`threadID` is 0 there), but only after taking
    /// the thread's `kernelLock`, which a parent thread may hold at the fork (the thread itself during its start-up
    /// or exit, or any thread renaming it or setting its priority): the child then waits for ever.
    @Test("in a forked child, setPriority on a thread of the parent does not wait for a lock a parent thread held",
          .disabled(if: forkTestsUnderThreadSanitizer, "children of a busy process hang under ThreadSanitizer"))
    func setPriorityOfParentThreadInChildDoesNotHang() throws {
        let release = QTGate()
        let parentThread = try SpindleThread.spawnJoinable(name: "tr-locked") { _ = release.wait() }
        #expect(waitUntil(deadline: qtDeadline) { parentThread.isExecuting })
        let held = QTGate(), unlock = QTGate()
        // A parent thread inside `parentThread`'s kernelLock at the fork (as `name`'s setter is around its syscall).
        let holder = try SpindleThread.spawnJoinable(name: "tr-holder") {
            parentThread.kernelLock.lock()
            held.open()
            _ = unlock.wait()
            parentThread.kernelLock.unlock()
        }
        #expect(held.wait())
        // One second is plenty (the call must return at once), and bounds the child: `InlineLock` spins (with
        // sched_yield), so a hung child burns a core until its alarm, slowing other tests' forked children.
        let code = forkChildAndWait(alarmSeconds: 1) {
            parentThread.setPriority(0.25) ? 1 : 0  // nothing to apply it to here: false, at once
        }
        unlock.open()
        release.open()
        try holder.join()
        try parentThread.join()
        #expect(code == 0, "child exit code \(code) (-14 = killed by SIGALRM: hung on the parent thread's kernelLock)")
    }

    /// Fork tracking (`pthread_atfork`) starts only when something asks `ForkGeneration.current` (a thread start, a
    /// queue, a deadline...). Until then the generation stays 0 in every child, but `threadID` compares raw
    /// generations: in a process that has only met its threads through `SpindleThread.current` (the main thread's
    /// object, or an adopted thread's), a forked child reads the parent's thread id, and `setPriority` there renices
    /// the PARENT's thread (the fix in `ForkChildLocksTests.currentThreadInForkedChild` covers only spawned threads,
    /// whose `launch` starts tracking). Run in a fresh process, where nothing has started tracking.
    @Test("in a forked child, an adopted thread's threadID and setPriority are the child's, even before any thread start",
          .disabled(if: forkTestsUnderThreadSanitizer, "children of a busy process hang under ThreadSanitizer"))
    func adoptedThreadInForkedChildWithoutTracking() async {
        await #expect(processExitsWith: .success) {
            let me = SpindleThread.current  // main's or an adopted object: nothing here starts fork tracking
            let tid = me.threadID
            let before = procNice(tid: tid)
            let code = forkChildAndWait {
                var bits: Int32 = 0
                if SpindleThread.current.threadID != cshim_gettid() { bits |= 1 }
                _ = SpindleThread.current.setPriority(0.0)  // nice 19 for the child's thread only
                return bits
            }
            let after = procNice(tid: tid)
            // Exit code bits: 1 = the child read the parent's thread id, 2 = the parent's nice value changed,
            // 4 = the child failed otherwise.
            var bits: Int32 = 0
            if code == 1 { bits |= 1 } else if code != 0 { bits |= 4 }
            if before != after { bits |= 2 }
            exit(bits)
        }
    }

    /// `SpindleDiagnostics` says a forked child starts with no handler (its lock may have been held by a parent
    /// thread at the fork, so the child gets a fresh slot). The slot is keyed by the raw fork generation, which
    /// never changes until tracking starts: in a process that has not started a thread or made a queue yet, the child
    /// keeps the parent's slot, its handler, and its lock (held for ever if a parent thread was inside `setHandler`
    /// or `report` at the fork). Run in a fresh process.
    @Test("a forked child starts with no diagnostics handler, even before any thread start",
          .disabled(if: forkTestsUnderThreadSanitizer, "children of a busy process hang under ThreadSanitizer"))
    func diagnosticsHandlerNotInheritedWithoutTracking() async {
        await #expect(processExitsWith: .success) {
            let called = SpindleLockedValue(false)
            SpindleDiagnostics.setHandler { _ in called.withLockedValue { $0 = true } }
            let code = forkChildAndWait {
                SpindleDiagnostics.report(.blockHelperSpawnFailed(errno: EAGAIN))
                return called.value ? 1 : 0
            }
            exit(code)  // 1: the forked child called the parent's handler
        }
    }

    /// The same destructor order reached by a misuse: at thread exit `ThreadContext.knownThread` is already nil, so
    /// `join()` on the exiting thread itself (from a thread-local value's deinit) passes the `joinSelf` check and
    /// reaches `pthread_join` on itself: EDEADLK, and `checkPthread` traps instead of throwing `joinSelf`.
    @Test("join() of a thread on itself from a thread-local's deinit at thread exit throws joinSelf (no trap)")
    func joinSelfFromThreadLocalDeinitThrows() async {
        await #expect(processExitsWith: .success) {
            let done = OracleSemaphore()
            let outcome = SpindleLockedValue<String>("not run")
            let started = OracleSemaphore()
            let thread = SpindleThread(name: "tr-selfjoin") { me in
                _ = started.wait(seconds: 5)  // `joinable` is published once `startJoinable()` has returned
                trJoinLocal.value = TRSelfJoiner(thread: me, outcome: outcome, done: done)
            }
            try! thread.startJoinable()
            started.post()
            guard done.wait(seconds: 5) else { exit(3) }
            // The refused self-join left it joinable: joined here (ThreadSanitizer reports a thread never joined).
            guard (try? thread.join()) != nil else { exit(4) }
            exit(outcome.value == "joinSelf" ? 0 : 1)
        }
    }
}
