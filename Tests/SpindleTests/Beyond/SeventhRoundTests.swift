import Glibc
import Testing

@testable import Spindle

// Fixes of the seventh round (2026-11-26) that have no better home: each test below failed on the code before its
// fix.

@Suite(.serialized) struct SeventhRoundTests {
    /// `QueueCore.join` (a queue's or a pool's threads, collected at shutdown) swallowed every error of `join()`. A
    /// worker that is itself waiting in `join()` for the collecting thread makes that join throw `joinCycle`; the
    /// worker was then left joinable for ever (its pthread never joined nor detached). Now it is detached.
    @Test("a collected thread that is joining the collecting thread is detached, not left unjoined")
    func aCollectedThreadJoiningTheCollectorIsDetached() throws {
        let collectorBox = SpindleLockedValue<SpindleThread?>(nil)
        let go = OracleSemaphore()
        let workerEnded = OracleSemaphore()
        let worker = try SpindleThread.spawnJoinable(name: "jc-worker") {
            _ = go.wait()
            if let collector = collectorBox.value { try? collector.join() }
            workerEnded.post()
        }
        let seen = SpindleLockedValue<(waiting: Bool, state: UInt8)?>(nil)
        let collectorEnded = OracleSemaphore()
        let collector = try SpindleThread.spawnJoinable(name: "jc-collector") {
            // The worker waits in join() for this thread before this thread collects it.
            let waiting = waitUntil(deadline: qtDeadline) { JoinWaits.target(of: worker) != nil }
            if waiting { QueueCore.join([worker]) }
            seen.withLockedValue { $0 = (waiting, worker.joinState.load(ordering: .acquiring)) }
            collectorEnded.post()
        }
        collectorBox.withLockedValue { $0 = collector }
        go.post()
        #expect(collectorEnded.wait(), "the collecting thread did not end")
        #expect(workerEnded.wait(), "the worker did not end")
        let outcome = seen.value
        #expect(outcome?.waiting == true, "the worker never waited for the collecting thread")
        #expect(outcome?.state == SpindleThread.JoinState.detached.rawValue,
                "the worker was left \(outcome.map { "\($0.state)" } ?? "?"), not detached")
        // The pthreads are not leaked whatever happened: join what is still joinable.
        if worker.joinState.load(ordering: .acquiring) == SpindleThread.JoinState.joinable.rawValue {
            try? worker.join()
        }
        if collector.joinState.load(ordering: .acquiring) == SpindleThread.JoinState.joinable.rawValue {
            try? collector.join()
        }
    }
}

extension SeventhRoundTests {
    /// One poll(2) may watch at most RLIMIT_NOFILE descriptors (more: EINVAL, which trapped the loop's thread). An
    /// add past it is refused (`tooManyDescriptorSources`, nothing changed); a limit lowered after the adds makes
    /// the loop watch the first ones it allows, reported once (`runLoopPollFailed`), and go on serving. A process of
    /// its own: the limit and the diagnostics handler are process-wide.
    @Test func aLoopRefusesMoreDescriptorSourcesThanOnePollMayWatchAndSurvivesALoweredLimit() async {
        await #expect(processExitsWith: .success) {
            qtStartExitTestWatchdog(seconds: 3 * qtDeadline)  // a hang anywhere below fails (exit 9)
            func setSoftLimit(_ value: rlim_t) -> Bool {
                var limit = rlimit()
                guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return false }
                limit.rlim_cur = value
                return setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0
            }
            var fds: [Int32] = [-1, -1]
            guard pipe(&fds) == 0, let thread = try? SpindleRunLoopThread(name: "rl-nofile") else { exit(2) }
            let readEnd = fds[0], writeEnd = fds[1]
            // Non-blocking: every source on the descriptor is told it is readable; the first reads the byte.
            guard fcntl(readEnd, F_SETFL, fcntl(readEnd, F_GETFL) | O_NONBLOCK) == 0 else { exit(2) }
            let loop = thread.runLoop
            let readable = QTGate()
            func source() -> SpindleDescriptorSource? {
                try? SpindleDescriptorSource(descriptor: readEnd, interest: .readable) { _ in
                    var byte: UInt8 = 0
                    _ = read(readEnd, &byte, 1)
                    readable.open()
                }
            }
            // Every descriptor this needs is open: lower the limit to 16 (15 sources and the loop's wakeup).
            guard setSoftLimit(16) else { exit(2) }
            var added = 0
            var refusal = ""
            for _ in 0..<20 {
                guard let s = source() else { exit(2) }
                do { try loop.add(s) } catch { refusal = "\(error)"; break }
                added += 1
            }
            guard added == 15, refusal == "\(SpindleError.tooManyDescriptorSources(limit: 16))" else { exit(3) }
            // Raised, ten more; then lowered below what the loop watches: it must go on serving.
            guard setSoftLimit(64) else { exit(2) }
            for _ in 0..<10 {
                guard let s = source(), (try? loop.add(s)) != nil else { exit(4) }
            }
            let reported = SpindleLockedValue<[SpindleDiagnosticEvent]>([])
            SpindleDiagnostics.setHandler { event in
                if case .runLoopPollFailed = event { reported.withLockedValue { $0.append(event) } }
            }
            guard setSoftLimit(8) else { exit(2) }
            // The loop may still sit in a poll begun under the old limit: a perform wakes it, and its next look at
            // the descriptors is under the new one (reported: a fact with no signal, polled).
            let passed = QTGate()
            _ = loop.perform { passed.open() }
            guard passed.wait(), qtWaitUntil(seconds: qtDeadline, { !reported.value.isEmpty }) else { exit(6) }
            var byte: UInt8 = 1
            guard write(writeEnd, &byte, 1) == 1 else { exit(2) }
            guard readable.wait() else { exit(5) }
            // Reported once, by the pass's look at its descriptors (25) or by its wait (26, the wakeup with them).
            let once = reported.value
            guard once == [.runLoopPollFailed(errno: EINVAL, watched: 25, polled: 8)]
                || once == [.runLoopPollFailed(errno: EINVAL, watched: 26, polled: 8)]
            else { exit(once.isEmpty ? 6 : 8) }
            guard setSoftLimit(64), (try? thread.shutdown()) != nil else { exit(7) }
            exit(0)
        }
    }
}
