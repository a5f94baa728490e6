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
