import Benchmark
import CoreFoundation
import Dispatch
import Foundation
import Spindle

/// Cross-thread round trips into a thread that sits in its run loop: a perform, a port message, and (Foundation)
/// a timer set to fire now. The loop's thread signals back; the measuring thread waits. The main rows wait with a
/// `DispatchSemaphore` for Spindle and Foundation alike (the same waiter, so the rows compare the run loops); the
/// "Spindle end to end" rows wait with Spindle's own semaphore.
func registerRunLoopBenchmarks() {
    let trips = 10_000
    let config = scenario(iterations: 5)

    /// Spindle's rows: the same waiter as Foundation's, and Spindle's own ("end to end").
    func spindleRows<W: WaitingSemaphore>(_ label: String, _ makeWaiter: @escaping @Sendable () -> W) {
        Benchmark("run-loop perform round trip ×\(trips): \(label)", configuration: config) { benchmark in
            let loop = SpindleLoopThread { _ in }
            let back = makeWaiter()
            measureHandOvers(benchmark, trips, waitingOn: back) { _ in loop.runLoop.perform { back.signalOne() } }
            loop.stop()
        }
        Benchmark("run-loop port message round trip ×\(trips): \(label)", configuration: config) { benchmark in
            let back = makeWaiter()
            let loop = SpindleLoopThread { _ in back.signalOne() }
            measureHandOvers(benchmark, trips, waitingOn: back) { i in try! loop.port.send(i) }
            loop.stop()
        }
    }
    spindleRows("Spindle") { DispatchSemaphore(value: 0) }
    spindleRows("Spindle end to end (SpindleSemaphore)") { try! SpindleSemaphore(value: 0) }
    Benchmark("run-loop perform round trip ×\(trips): Foundation RunLoop (perform + wake)", configuration: config) {
        benchmark in
        let loop = FoundationLoopThread.shared
        let back = DispatchSemaphore(value: 0)
        benchmark.startMeasurement()
        for _ in 0..<trips {
            loop.runLoop.perform { back.signal() }
            CFRunLoopWakeUp(loop.cfRunLoop)
            back.wait()
        }
        benchmark.stopMeasurement()
    }
    Benchmark("run-loop port message round trip ×\(trips): Foundation RunLoop (timer firing now)",
              configuration: config) { benchmark in
        let loop = FoundationLoopThread.shared
        let back = DispatchSemaphore(value: 0)
        benchmark.startMeasurement()
        for _ in 0..<trips {
            loop.runLoop.add(Timer(timeInterval: 0, repeats: false) { _ in back.signal() }, forMode: .default)
            back.wait()
        }
        benchmark.stopMeasurement()
    }
}

/// A Spindle thread running its run loop, with a port whose handler is `onMessage`.
final class SpindleLoopThread: @unchecked Sendable {
    let port: SpindlePort<Int>
    private(set) var runLoop: SpindleRunLoop!
    private let thread: SpindleThread

    init(onMessage: @escaping @Sendable (Int) -> Void) {
        let port = SpindlePort<Int>(name: "bench", handler: onMessage)
        self.port = port
        let ready = try! SpindleSemaphore(value: 0)
        let box = LoopBox()
        self.thread = try! SpindleThread.spawnJoinable(name: "bench-loop") {
            let loop = SpindleRunLoop.current
            try! loop.add(port)
            box.loop = loop
            ready.signal()
            _ = try? loop.run(untilInvalidated: port)
        }
        ready.wait()
        self.runLoop = box.loop
    }

    func stop() {
        self.port.invalidate()
        try! self.thread.join()
    }

    private final class LoopBox: @unchecked Sendable { var loop: SpindleRunLoop? }
}

/// A Foundation thread running its RunLoop (kept alive by a far-off timer), one per process: Foundation's run loop
/// threads are not stopped and recreated between iterations.
final class FoundationLoopThread: @unchecked Sendable {
    static let shared = FoundationLoopThread()

    private(set) var runLoop: RunLoop!
    private(set) var cfRunLoop: CFRunLoop!

    private init() {
        let ready = DispatchSemaphore(value: 0)
        Thread.detachNewThread { [self] in
            self.runLoop = RunLoop.current
            self.cfRunLoop = CFRunLoopGetCurrent()
            RunLoop.current.add(Timer(timeInterval: 1e6, repeats: true) { _ in }, forMode: .default)
            ready.signal()
            while true { _ = RunLoop.current.run(mode: .default, before: .distantFuture) }
        }
        ready.wait()
    }
}
