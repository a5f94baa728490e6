import CShim
import Glibc
import Testing

@testable import Spindle

/// Run-loop edge cases a review found: a past deadline and descriptors, a nested run under a port that invalidated
/// itself, a timer in a mode nobody runs, a timer's own nested run, and a shutdown under a perform that re-posts
/// itself or a sender that never stops. Each failed before its fix.
@Suite("SpindleRunLoop edges", .timeLimit(.minutes(2)))
struct RunLoopEdgeTests {
    typealias T = RunLoopTestSupport

    /// A pipe with `bytes` already written; returns (read end, write end).
    private func pipeWithData(_ bytes: Int) -> (Int32, Int32) {
        var fds: [Int32] = [0, 0]
        precondition(pipe(&fds) == 0)
        var byte: UInt8 = 7
        for _ in 0..<bytes { precondition(write(fds[1], &byte, 1) == 1) }
        return (fds[0], fds[1])
    }

    /// A source that reads one byte from `descriptor` per event and records the event.
    private func readingSource(_ descriptor: Int32, recordingInto events: CallRecorder) throws -> SpindleDescriptorSource {
        try SpindleDescriptorSource(descriptor: descriptor, interest: .readable) { _ in
            var byte: UInt8 = 0
            _ = read(descriptor, &byte, 1)
            events.record()
        }
    }

    /// "A past deadline still runs ready work once": a descriptor that is ready is ready work. Before, the pass
    /// returned `timedOut` before polling the descriptors.
    @Test func aPastDeadlineDeliversAReadyDescriptor() throws {
        let result = RLBox<(Bool, Int)>((false, -1))
        try T.onNewThread {
            let (readEnd, writeEnd) = self.pipeWithData(1)
            defer { close(readEnd); close(writeEnd) }
            let events = CallRecorder()
            let source = try self.readingSource(readEnd, recordingInto: events)
            try SpindleRunLoop.current.add(source)
            let handled = try SpindleRunLoop.current.runOnce(before: .now)
            result.withLock { $0 = (handled, events.count) }
            source.cancel()
        }
        #expect(result.withLock { $0 } == (true, 1))
    }

    /// `SpindleRunLoopThread.shutdown` serves the events of descriptor sources that are ready then.
    @Test func shutdownServesAReadyDescriptor() throws {
        let (readEnd, writeEnd) = self.pipeWithData(0)
        defer { close(readEnd); close(writeEnd) }
        let loopThread = try SpindleRunLoopThread(name: "edge-shutdown-fd")
        let events = CallRecorder()
        let source = try self.readingSource(readEnd, recordingInto: events)
        try loopThread.runLoop.add(source)
        let inTimer = try SpindleSemaphore(value: 0)
        let resume = try SpindleSemaphore(value: 0)
        let timer = try SpindleTimer(interval: 0.001, repeats: false) { _ in
            var byte: UInt8 = 1
            _ = write(writeEnd, &byte, 1)  // ready from here on, while the shutdown is asked for
            inTimer.signal()
            _ = resume.wait(until: T.after(T.patience))
        }
        try loopThread.runLoop.add(timer)
        #expect(inTimer.wait(until: T.after(T.patience)))
        #expect(try loopThread.shutdown(until: .now) == false)  // asked for; the timer's callout still runs
        resume.signal()
        #expect(try loopThread.shutdown(until: T.after(T.patience)))
        #expect(events.count == 1)
    }

    /// A descriptor that stays ready (its handler never reads it) cannot hold a `SpindleRunLoopThread`'s shutdown:
    /// the last pass polls the descriptors once, not for as long as they are ready.
    @Test func aDescriptorThatStaysReadyDoesNotHoldTheShutdown() throws {
        let (readEnd, writeEnd) = self.pipeWithData(1)  // never read: readable for good
        defer { close(readEnd); close(writeEnd) }
        let loopThread = try SpindleRunLoopThread(name: "edge-ready-fd")
        let delivered = try SpindleSemaphore(value: 0)
        let source = try SpindleDescriptorSource(descriptor: readEnd, interest: .readable) { _ in delivered.signal() }
        try loopThread.runLoop.add(source)
        #expect(delivered.wait(until: T.after(T.patience)))
        #expect(try loopThread.shutdown(until: T.after(T.patience)), "the shutdown did not finish")
    }

    /// A port whose handler invalidated it, then runs the loop in an empty mode: the nested run returns at once
    /// (the port, retiring but in service up the stack, is no work for it). Before, it slept to its deadline.
    @Test func aNestedRunUnderASelfInvalidatedPortReturnsAtOnce() throws {
        let nested = RLBox<(elapsed: Double, handled: Bool?)>((-1, nil))
        try T.onNewThread {
            let loop = SpindleRunLoop.current
            let portBox = RLBox<SpindlePort<Int>?>(nil)
            let port = SpindlePort<Int>(name: "self-invalidating") { _ in
                portBox.withLock { $0 }!.invalidate()
                let start = cshim_clock_monotonic_ns()
                let handled = try? loop.runOnce(mode: "edge-empty", before: T.after(3 * T.patience))
                nested.withLock { $0 = (T.seconds(since: start), handled) }
            }
            portBox.withLock { $0 = port }
            try loop.add(port)
            try port.send(1)
            _ = try loop.run(untilInvalidated: port, before: T.after(6 * T.patience))
            portBox.withLock { $0 = nil }
        }
        let (elapsed, handled) = nested.withLock { $0 }
        #expect(handled == false)
        #expect(elapsed >= 0 && elapsed < T.patience, "the nested run waited \(elapsed) s for a port it cannot serve")
    }

    /// A repeating timer scheduled in two modes, only one of which runs: the other mode's heap stays bounded.
    /// Before, it grew by one entry per firing (454 after 453 firings), each keeping the timer alive.
    @Test func aTimerInAModeNobodyRunsKeepsItsHeapBounded() throws {
        let other: SpindleRunLoop.Mode = "edge-other"
        let seen = RLBox<(fired: Int, heap: Int)>((0, 0))
        try T.onNewThread {
            let loop = SpindleRunLoop.current
            let fired = CallRecorder()
            let timer = try SpindleTimer(interval: 0.0005, repeats: true) { t in
                fired.record()
                guard fired.count >= 300 else { return }
                // Read before invalidating: an invalidation compacts the heaps it leaves.
                let heap = loop.state.withLock { $0.tables[other]?.heap.count ?? 0 }
                seen.withLock { $0 = (fired.count, heap) }
                t.invalidate()
            }
            try loop.add(timer, forMode: .default)
            try loop.add(timer, forMode: other)
            try loop.run(until: T.after(6 * T.patience), mode: .default)  // returns once the timer is invalidated
        }
        let (fired, heap) = seen.withLock { $0 }
        #expect(fired == 300)
        #expect(heap <= 2 + 64 + 1, "the unrun mode's heap holds \(heap) entries after \(fired) firings")
    }

    /// A repeating timer whose handler runs the loop again is not fired inside its own callout (as CFRunLoop).
    /// Before, it re-entered (nesting depth 2).
    @Test func aTimerDoesNotFireInsideItsOwnCallout() throws {
        let seen = RLBox<(maxDepth: Int, firings: Int)>((0, 0))
        try T.onNewThread {
            let loop = SpindleRunLoop.current
            let depth = RLBox<Int>(0)
            let other = try SpindleTimer(interval: 0.001, repeats: true) { _ in }  // keeps the nested run busy
            let timer = try SpindleTimer(interval: 0.002, repeats: true) { t in
                let now = depth.withLock { $0 += 1; return $0 }
                seen.withLock { $0 = (max($0.maxDepth, now), $0.firings + 1) }
                if now == 1 { _ = try? loop.run(until: T.after(0.05)) }  // spans many of this timer's periods
                depth.withLock { $0 -= 1 }
                if seen.withLock({ $0.firings }) >= 5 {
                    t.invalidate()
                    other.invalidate()
                }
            }
            try loop.add(other)
            try loop.add(timer)
            try loop.run(until: T.after(6 * T.patience))
        }
        #expect(seen.withLock { $0 }.maxDepth == 1)
        #expect(seen.withLock { $0 }.firings >= 5)
    }

    /// A perform that queues itself again cannot hold a `SpindleRunLoopThread`'s shutdown: what was queued before
    /// it is served, later ones are not. Before, the shutdown never finished.
    @Test func aSelfRepostingPerformDoesNotHoldTheShutdown() throws {
        final class Reposter: @unchecked Sendable {
            let loop: SpindleRunLoop
            let runs = RLBox<Int>(0)
            init(_ loop: SpindleRunLoop) { self.loop = loop }
            func post() {
                self.runs.withLock { $0 += 1 }
                self.loop.perform { self.post() }
            }
        }
        let loopThread = try SpindleRunLoopThread(name: "edge-repost")
        let reposter = Reposter(loopThread.runLoop)
        let started = try SpindleSemaphore(value: 0)
        loopThread.runLoop.perform {
            started.signal()
            reposter.post()
        }
        #expect(started.wait(until: T.after(T.patience)))
        #expect(try loopThread.shutdown(until: T.after(T.patience)), "the shutdown did not finish")
        #expect(reposter.runs.withLock { $0 } > 0)
    }

    /// A sender that never stops cannot hold a `SpindleRunLoopThread`'s shutdown: the messages accepted before it
    /// began are delivered, later ones wait on the port. Before, the shutdown served the stream for as long as it
    /// lasted.
    @Test func aSenderThatNeverStopsDoesNotHoldTheShutdown() throws {
        let loopThread = try SpindleRunLoopThread(name: "edge-stream")
        let delivered = RLBox<[Int]>([])
        let port = SpindlePort<Int>(name: "stream") { value in
            delivered.withLock { $0.append(value) }
            T.burn(seconds: 0.000_005)  // slower than the sender, which keeps messages waiting
        }
        try loopThread.runLoop.add(port)
        for value in 0..<100 { try port.send(value) }
        let stop = RLBox<Bool>(false)
        let streaming = try SpindleSemaphore(value: 0)
        let sender = try SpindleThread.spawnJoinable(name: "edge-sender") {
            var value = 100
            while !stop.withLock({ $0 }) {
                // Keeps messages waiting, but never more than 1,000: the loop always has more to deliver.
                guard port.pendingCount < 1_000 else {
                    sched_yield()
                    continue
                }
                try? port.send(value)
                if value == 100 { streaming.signal() }
                value += 1
            }
        }
        #expect(streaming.wait(until: T.after(T.patience)))
        let finished = try loopThread.shutdown(until: T.after(T.patience))
        stop.withLock { $0 = true }
        try sender.join()
        #expect(finished, "the shutdown did not finish while the sender kept sending")
        let values = delivered.withLock { $0 }
        #expect(Array(values.prefix(100)) == Array(0..<100), "a message accepted before the shutdown was not delivered")
        #expect(values == Array(0..<values.count), "messages delivered out of order or twice")
    }
}
