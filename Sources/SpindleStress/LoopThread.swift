import Glibc
import Spindle
import Synchronization

/// A joinable thread that runs its own SpindleRunLoop (kept alive by a long timer) until `stop()`; used by the
/// `runloop` and `timers` scenarios. `loop` and `tid` are written before `ready` is signalled and read after.
final class LoopThread: @unchecked Sendable {
    private let ready = try! SpindleSemaphore(value: 0)
    private let exited = try! SpindleSemaphore(value: 0)
    private let done = Atomic<Bool>(false)
    private(set) var loop: SpindleRunLoop!
    private(set) var tid: Int32 = 0
    private var thread: SpindleThread?

    /// Starts the thread; returns nil (and counts a violation) if it could not start or its loop did not come up.
    init?(_ ctx: ScenarioContext, name: String) {
        do {
            guard let thread = spawnRetrying(name: name, { [self] in
                self.loop = SpindleRunLoop.current
                self.tid = SpindleThread.current.threadID
                let keepAlive = try! SpindleTimer(interval: 3600, repeats: true) { _ in }
                try! self.loop.add(keepAlive)
                self.ready.signal()
                while !self.done.load(ordering: .acquiring) {
                    _ = try? self.loop.runOnce(before: .after(.seconds(1)))
                }
                keepAlive.invalidate()
                self.exited.signal()
            }) else { throw SpindleError.system(function: "pthread_create", errno: EAGAIN) }
            self.thread = thread
        } catch {
            ctx.violation("thread-stuck", "could not start run-loop thread \(name): \(error)")
            return nil
        }
        if !self.ready.wait(timeout: .seconds(10)) {
            ctx.violation("thread-stuck", "run-loop thread \(name) did not come up in 10 s")
            return nil
        }
    }

    /// Whether the caller is this loop's thread.
    var isCurrent: Bool { SpindleThread.current.threadID == self.tid }

    /// Ends the loop and joins the thread (bounded: a loop that does not return is a violation, left running).
    func stop(_ ctx: ScenarioContext) {
        self.done.store(true, ordering: .releasing)
        self.loop.stop()
        self.loop.wakeUp()
        if self.exited.wait(timeout: .seconds(10)) {
            try? self.thread?.join()
        } else {
            ctx.violation("thread-stuck", "a run-loop thread did not return from runOnce within 10 s of stop()")
        }
        self.thread = nil
    }
}
