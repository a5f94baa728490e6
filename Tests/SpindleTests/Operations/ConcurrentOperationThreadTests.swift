import CShim
import Glibc
import Spindle
import Testing

/// What a concurrent operation's `main` saw of its own thread, recorded from inside `main`.
private struct ThreadProbe: Sendable {
    var tid: Int32 = 0
    var comm: String? = nil
    var currentName = ""
    var currentThreadID: Int32 = 0
    var currentIsExecuting = false
    var operationIsCurrent = false
    var nice: Int32 = 99
    var liveSpawned = 0
}

/// A concurrent operation that records its thread from `main`, then finishes.
private final class ProbingOperation: SpindleConcurrentOperation, @unchecked Sendable {
    let probe = SpindleLockedValue(ThreadProbe())
    let thread = SpindleLockedValue<WeakThread?>(nil)

    override func main() throws {
        let current = SpindleThread.current
        let tid = kernelThreadID()  // from /proc/thread-self, not from Spindle
        var seen = ThreadProbe()
        seen.tid = tid
        seen.comm = readComm(tid: tid)
        seen.currentName = current.name
        seen.currentThreadID = current.threadID
        seen.currentIsExecuting = current.isExecuting
        seen.operationIsCurrent = SpindleOperation.current === self
        seen.nice = cshim_getpriority_thread(tid)
        seen.liveSpawned = SpindleThread.liveSpawnedCount
        self.probe.withLockedValue { $0 = seen }
        let weak = WeakThread(current)
        self.thread.withLockedValue { $0 = weak }
        try self.finish()
    }
}

private final class WeakThread: @unchecked Sendable {
    weak var value: SpindleThread?
    init(_ value: SpindleThread) { self.value = value }
}

/// The thread a concurrent operation's `start()` spawns: its name, identity, priority and lifetime as `main` sees
/// them (the start-up path is tuned for latency; these are the facts it must keep).
@Suite("Concurrent operation threads", .serialized, .timeLimit(.minutes(2)))
struct ConcurrentOperationThreadTests {
    @Test("main runs on a new Spindle thread named after the operation, already in /proc, with its identity set",
          arguments: [(String?.none, "spindle-op"), ("upload-operation-42", "upload-operatio"), ("операция-загрузки", "операци")])
    func mainSeesItsThread(name: String?, expected: String) throws {
        let op = ProbingOperation()
        op.name = name
        try op.start()
        #expect(try op.waitUntilFinished(timeout: .seconds(10)))
        let seen = op.probe.withLockedValue { $0 }
        #expect(seen.tid > 0 && seen.tid != kernelThreadID(), "main ran on the starting thread")
        #expect(seen.comm == expected, "the kernel's name when main began")
        #expect(seen.currentName == expected)
        #expect(seen.currentThreadID == seen.tid)
        #expect(seen.currentIsExecuting)
        #expect(seen.operationIsCurrent, "SpindleOperation.current inside main")
        #expect(seen.nice == 0, "default thread priority is nice 0")
        #expect(seen.liveSpawned >= 1)
        // The thread ends after finish and takes its SpindleThread with it.
        #expect(waitUntil(deadline: 10) { !taskExists(tid: seen.tid) })
        #expect(waitUntil(deadline: 10) { op.thread.withLockedValue { $0?.value == nil } })
    }

    @Test("the operation's thread priority holds in main, whatever the starting thread's nice value",
          arguments: [(0.5, Int32(0)), (0.25, Int32(10)), (0.0, Int32(19))])
    func priorityInMain(priority: Double, nice: Int32) throws {
        let op = ProbingOperation()
        op.threadPriority = priority
        // Started from a thread at nice 19: the new thread inherits 19 from it and must set its own value.
        let starter = try SpindleThread.spawnJoinable(name: "low-starter", priority: 0.0) { try? op.start() }
        try starter.join()
        #expect(try op.waitUntilFinished(timeout: .seconds(10)))
        let seen = op.probe.withLockedValue { $0 }
        #expect(seen.tid > 0)
        #expect(seen.nice == nice)
    }

    @Test("many starts in a row: each main on its own thread, every thread gone afterwards")
    func manyStarts() throws {
        let count = 200
        let ops = (0..<count).map { _ in ProbingOperation() }
        for op in ops {
            try op.start()
            #expect(try op.waitUntilFinished(timeout: .seconds(10)))
        }
        let tids = ops.map { $0.probe.withLockedValue { $0.tid } }
        #expect(tids.allSatisfy { $0 > 0 })
        #expect(ops.allSatisfy { $0.probe.withLockedValue { $0.comm == "spindle-op" && $0.operationIsCurrent } })
        #expect(waitUntil(deadline: 10) { tids.allSatisfy { !taskExists(tid: $0) } })
        #expect(waitUntil(deadline: 10) { ops.allSatisfy { $0.thread.withLockedValue { $0?.value == nil } } })
    }
}
