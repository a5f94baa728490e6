import CShim
import Glibc
import Synchronization
import Testing

@testable import Spindle

extension RunLoopReviewTests {
    /// Fork: a run loop's wakeup eventfd (`RunLoopWakeup`) is inherited by a forked child and never re-made, so
    /// the child's copy of the loop (its forking thread's `SpindleRunLoop.current`, or `SpindleRunLoop.main` when
    /// the main thread forks) shares one kernel counter with the parent's loop. The child's `drain()` (every pass
    /// of a run) then consumes the parent's wakeups: a port message sent to the parent's loop while it sleeps in
    /// poll is missed until its deadline (RELIABILITY 35: the child must get a re-initialised library or a
    /// refusal, and the parent must be unaffected).
    @Test("a forked child running its inherited loop does not steal the parent loop's wakeups",
          .disabled(if: forkTestsUnderThreadSanitizer, "forked children hang under ThreadSanitizer"))
    func forkedChildDoesNotStealTheParentsWakeups() throws {
        let rounds = 1_000  // a steal is a race each round (a few percent of rounds here); stops after 2 misses
        let results = RLBox<[(handled: Bool, seconds: Double)]>([])
        let portBox = RLBox<SpindlePort<Int>?>(nil)
        let ownerTid = RLBox<Int32>(0)
        let childPid = RLBox<pid_t>(0)
        let ready = QTGate()
        let roundStart = QTGate()
        let roundDone = QTGate()
        let owner = try BTThread("rl-review-forker") {
            let loop = SpindleRunLoop.current
            let port = SpindlePort<Int>(name: "parent-port") { _ in }
            try? loop.add(port, forMode: .default)
            portBox.withLock { $0 = port }
            ownerTid.withLock { $0 = cshim_gettid() }
            let pid = fork()
            if pid == 0 {
                var set = sigset_t()
                sigemptyset(&set)
                sigaddset(&set, SIGALRM)
                pthread_sigmask(SIG_UNBLOCK, &set, nil)
                alarm(30)  // the parent kills it sooner; this only bounds a lost child
                // The child uses the loop it inherited, as any code on this thread would (passes, no waiting).
                while true { _ = try? loop.runOnce(mode: .default, before: .now) }
            }
            childPid.withLock { $0 = pid }
            ready.open()
            for _ in 0..<rounds {
                if results.withLock({ $0.filter { !$0.handled || $0.seconds > 0.2 }.count }) >= 2 { break }
                roundStart.open()
                let start = cshim_clock_monotonic_ns()
                let handled = (try? loop.runOnce(mode: .default, before: T.after(0.3))) ?? false
                results.withLock { $0.append((handled, T.seconds(since: start))) }
                if !handled { _ = try? loop.runOnce(mode: .default, before: .now) }  // the message it missed
                roundDone.open()
            }
            port.invalidate()
            _ = try? loop.runOnce(mode: .default, before: .now)
        }
        #expect(ready.wait())
        let port = try #require(portBox.withLock { $0 })
        let tid = ownerTid.withLock { $0 }
        for round in 0..<rounds {
            guard roundStart.wait(seconds: 2) else { break }  // the owner stopped early
            // The owner is asleep in poll (a /proc fact, polled); then a message is sent to its loop.
            _ = qtWaitUntil(seconds: 2) { qtThreadState(tid) == "S" }
            try port.send(round)
            guard roundDone.wait() else { break }
        }
        #expect(owner.join())
        let pid = childPid.withLock { $0 }
        if pid > 0 {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
        let seen = results.withLock { $0 }
        let late = seen.enumerated().filter { !$0.element.handled || $0.element.seconds > 0.2 }
        #expect(late.isEmpty,
                "the parent loop missed \(late.count) of \(seen.count) wakeups (handled, seconds): \(late.map { ($0.element.handled, $0.element.seconds) })")
    }

    /// Fork: a `SpindleRunLoopThread` of the parent, used in a forked child (where its thread does not exist):
    /// `perform` says the block was queued (it never runs), and `shutdown()` waits for ever for a thread that will
    /// never report its exit, instead of returning or refusing with a typed error as a parent queue does
    /// (`SpindleError.forkedChild`). The child here is killed by SIGALRM after 3 s.
    @Test("in a forked child, a parent SpindleRunLoopThread's shutdown() returns or refuses; it does not hang",
          .disabled(if: forkTestsUnderThreadSanitizer, "forked children hang under ThreadSanitizer"))
    func forkedChildShutdownOfAParentLoopThreadDoesNotHang() throws {
        let loopThread = try SpindleRunLoopThread(name: "rl-review-parent")
        let warm = QTGate()
        loopThread.runLoop.perform { warm.open() }
        #expect(warm.wait())
        let code = forkChildAndWait(alarmSeconds: 3) {
            do { try loopThread.shutdown() } catch { return 2 }
            return 0
        }
        // `perform` in the child: "queued", although nothing in the child will ever run it.
        let performCode = forkChildAndWait(alarmSeconds: 3) { loopThread.runLoop.perform({}) ? 1 : 0 }
        try loopThread.shutdown()
        #expect(code != -SIGALRM, "the child hung in shutdown() (killed by SIGALRM); exit code \(code)")
        #expect(performCode == 0, "child: perform on a loop whose thread is not in this process returned true (code \(performCode))")
    }

    /// Fork: `SpindleRunLoop.main` is the forked child's own main loop (the forking thread is the child's main
    /// thread), but its lock (`RunLoopLock`, a pthread mutex) is the parent's copy: if a parent thread held it at
    /// the fork (any `perform`, `add`, `currentMode`, ... on the main loop), every use of the main loop in the
    /// child blocks for ever. (The queues avoid their inherited locks in a child: `SpindleOperationQueue+Fork`;
    /// the process-wide locks of Review C were fixed the same way.)
    @Test("a forked child can use the main run loop while a parent thread was using it at the fork",
          .disabled(if: forkTestsUnderThreadSanitizer, "children of a busy process hang under ThreadSanitizer"))
    func mainLoopLockAcrossFork() throws {
        let stop = Atomic<Bool>(false)
        let main = SpindleRunLoop.main
        let warm = QTGate()
        let looper = try SpindleThread.spawnJoinable(name: "rl-review-main-loop") {
            _ = main.limitDate(forMode: "rl-review-unused")
            warm.open()
            while !stop.load(ordering: .relaxed) { _ = main.limitDate(forMode: "rl-review-unused") }
        }
        // The looper's first call past before any fork: a child forked while a parent thread makes the Swift
        // runtime's type metadata for the first time (under the runtime's own lock) hangs whatever it runs.
        #expect(warm.wait())
        var hung = 0
        var codes: [Int32] = []
        let rounds = 6
        for _ in 0..<rounds {
            let code = forkChildAndWait {
                _ = SpindleRunLoop.main.limitDate(forMode: "rl-review-unused")
                return 0
            }
            codes.append(code)
            if code != 0 { hung += 1 }
        }
        stop.store(true, ordering: .relaxed)
        try looper.join()
        #expect(hung == 0, "\(hung) of \(rounds) forked children hung using SpindleRunLoop.main (exit codes, -14 = killed by SIGALRM: \(codes))")
    }
}
