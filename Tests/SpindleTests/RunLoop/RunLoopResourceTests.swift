import CShim
import Glibc
import Spindle
import Testing

@Suite("RunLoop resources, stop and descriptor sources")
struct RunLoopResourceTests {
    typealias T = RunLoopTestSupport

    @Test("an idle run loop thread uses < 5 ms of CPU over a one-second run(until:)")
    func idleLoopUsesNoCPU() throws {
        let measured = RLBox<(cpu: UInt64, wall: Double)>((.max, 0))
        try T.onNewThread("rl-idle") {
            let loop = SpindleRunLoop.current
            let port = SpindlePort<Int>(name: "idle") { _ in }
            try loop.add(port, forMode: .default)
            let far = try SpindleTimer(interval: 3600, repeats: false) { _ in }
            try loop.add(far, forMode: .default)
            let cpuStart = cshim_clock_thread_cputime_ns()
            let start = cshim_clock_monotonic_ns()
            try loop.run(until: T.after(1.0))
            measured.withLock { $0 = (cshim_clock_thread_cputime_ns() - cpuStart, T.seconds(since: start)) }
            far.invalidate()
            port.invalidate()
        }
        let (cpu, wall) = measured.withLock { $0 }
        #expect(wall >= 1.0)
        #expect(cpu < 5_000_000, "idle loop used \(cpu) ns of CPU")
    }

    @Test("descriptors return to baseline after run-loop threads exit")
    func descriptorsFreedWithThreads() throws {
        let baseline = T.descriptorCount()
        var threads: [SpindleThread] = []
        for index in 0..<8 {
            threads.append(try T.spawn("rl-fd\(index)") {
                let loop = SpindleRunLoop.current
                let port = SpindlePort<Int>(name: "fd") { _ in }
                try? loop.add(port, forMode: .default)
                if let timer = try? SpindleTimer(interval: 0.001, repeats: false, handler: { _ in }) {
                    try! loop.add(timer, forMode: .default)
                }
                try? port.send(1)
                _ = try? loop.runOnce(before: T.after(10))
                // The port stays scheduled: the loop must still be freed (ports hold their loop weakly).
            })
        }
        for thread in threads { try thread.join() }
        #expect(T.poll(seconds: 10) { T.descriptorCount() <= baseline },
                "descriptors: baseline \(baseline), now \(T.descriptorCount())")
    }

    @Test("stop() from another thread ends run(); a stop before a run makes that run return at once")
    func stopFromAnotherThread() throws {
        let ready = try SpindleSemaphore(value: 0)
        let loopBox = RLBox<SpindleRunLoop?>(nil)
        let outcome = RLBox<[Double]>([])
        let loopThread = try T.spawn("rl-stop") {
            let loop = SpindleRunLoop.current
            let port = SpindlePort<Int>(name: "keepalive") { _ in }
            try? loop.add(port, forMode: .default)
            loopBox.withLock { $0 = loop }
            ready.signal()
            var start = cshim_clock_monotonic_ns()
            try? loop.run()
            outcome.withLock { $0.append(T.seconds(since: start)) }
            loop.stop()
            start = cshim_clock_monotonic_ns()
            let handled = (try? loop.runOnce(before: T.after(10))) ?? true
            outcome.withLock { $0.append(handled ? 99 : T.seconds(since: start)) }
            port.invalidate()
        }
        #expect(ready.wait(timeout: .seconds(10)))
        try #require(loopBox.withLock { $0 }).stop()
        try loopThread.join()
        let times = outcome.withLock { $0 }
        #expect(times.count == 2)
        #expect(times.allSatisfy { $0 < 5 })
    }

    @Test("a descriptor source reports readable data, then end of file once, then removes itself")
    func descriptorSourceReadsUntilEOF() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let (readEnd, writeEnd) = (fds[0], fds[1])
        defer { close(readEnd) }
        let events = RLBox<[String]>([])
        let sourceBox = RLBox<SpindleDescriptorSource?>(nil)
        try T.onNewThread("rl-fdsrc") {
            let loop = SpindleRunLoop.current
            let source = try SpindleDescriptorSource(descriptor: readEnd, interest: .readable) { event in
                switch event {
                case .readable:
                    var buffer = [UInt8](repeating: 0, count: 64)
                    let count = read(readEnd, &buffer, buffer.count)
                    events.withLock { $0.append("data:\(String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self))") }
                case .endOfFile: events.withLock { $0.append("eof") }
                case .writable: events.withLock { $0.append("writable?") }
                }
            }
            sourceBox.withLock { $0 = source }
            try loop.add(source, forMode: .default)
            let writer = try T.spawn("rl-writer") {
                _ = "hi".withCString { write(writeEnd, $0, 2) }
                close(writeEnd)
            }
            try loop.run(until: T.after(10))  // returns when the source removed itself (no sources left)
            try writer.join()
        }
        let seen = events.withLock { $0 }
        #expect(seen.last == "eof")
        #expect(seen.filter { $0 == "eof" }.count == 1)
        #expect(seen.dropLast().joined().replacingOccurrences(of: "data:", with: "") == "hi")
        #expect(sourceBox.withLock { $0 }?.isActive == false)
    }

    @Test("a writable source fires; cancel() stops it; a bad descriptor throws invalidDescriptor")
    func writableSourceAndCancel() throws {
        #expect(throws: SpindleError.self) { try SpindleDescriptorSource(descriptor: -1, interest: .readable) { _ in } }
        #expect(throws: SpindleError.self) { try SpindleDescriptorSource(descriptor: 987_654, interest: .readable) { _ in } }
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let writeEnd = fds[1]
        let calls = CallRecorder()
        try T.onNewThread("rl-fdw") {
            let loop = SpindleRunLoop.current
            let box = RLBox<SpindleDescriptorSource?>(nil)
            let source = try SpindleDescriptorSource(descriptor: writeEnd, interest: .writable) { event in
                if event == .writable { calls.record() }
                box.withLock { $0 }?.cancel()
            }
            box.withLock { $0 = source }
            try loop.add(source, forMode: .default)
            try loop.run(until: T.after(10))  // one writable event, then cancel leaves the mode empty
            guard !source.isActive else { throw TestFailure(message: "cancelled source still active") }
        }
        #expect(calls.count == 1)
    }
    /// Bug: descriptors were polled only on a pass that handled nothing, so a perform that re-posts itself (or a
    /// port that re-sends to itself) starved an always-readable pipe for ever. Every pass now gives ready
    /// descriptors a turn (CFRunLoop polls its sources on every pass too).
    @Test("a ready descriptor source gets a turn while performs or port messages keep arriving",
          arguments: ["perform", "port"])
    func descriptorSourcesAreNotStarved(by feeder: String) throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        _ = "x".withCString { write(fds[1], $0, 1) }  // never read: the read end stays readable
        let readEnd = fds[0]
        let outcome = RLBox<(events: Int, fed: Int, seconds: Double)>((0, 0, 99))
        try T.onNewThread("rl-fair") {
            let loop = SpindleRunLoop.current
            let events = RLBox(0)
            let fed = RLBox(0)
            let done = RLBox(false)
            let source = try SpindleDescriptorSource(descriptor: readEnd, interest: .readable) { _ in
                if events.withLock({ $0 += 1; return $0 }) == 3 { loop.stop() }
            }
            try loop.add(source, forMode: .default)
            @Sendable func feed() {
                fed.withLock { $0 += 1 }
                if !done.withLock({ $0 }) { loop.perform { feed() } }
            }
            let selfSending = RLBox<SpindlePort<Int>?>(nil)
            if feeder == "perform" {
                loop.perform { feed() }
            } else {
                let echo = SpindlePort<Int>(name: "echo") { value in
                    fed.withLock { $0 += 1 }
                    if !done.withLock({ $0 }) { try? selfSending.withLock { $0 }?.send(value + 1) }
                }
                selfSending.withLock { $0 = echo }
                try loop.add(echo, forMode: .default)
                try echo.send(0)
            }
            let start = cshim_clock_monotonic_ns()
            try loop.run(until: T.after(T.patience))  // the source's third event stops it
            let seconds = T.seconds(since: start)
            done.withLock { $0 = true }
            source.cancel()
            selfSending.withLock { $0 }?.invalidate()
            try loop.run(until: T.after(T.patience))  // the last feed and the port's retirement; then empty
            selfSending.withLock { $0 = nil }
            outcome.withLock { $0 = (events.withLock { $0 }, fed.withLock { $0 }, seconds) }
        }
        let (events, fed, seconds) = outcome.withLock { $0 }
        #expect(events >= 3, "\(events) descriptor events against \(fed) \(feeder)s")
        #expect(fed > 0)
        #expect(seconds < T.patience, "stopped by the source, not by the deadline")
    }
}

extension String {
    fileprivate func replacingOccurrences(of target: String, with replacement: String) -> String {
        var result = ""
        var rest = Substring(self)
        while let range = rest.firstRange(of: target) {
            result += rest[..<range.lowerBound] + replacement
            rest = rest[range.upperBound...]
        }
        return result + rest
    }
}
