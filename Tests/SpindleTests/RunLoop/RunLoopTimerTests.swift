import CShim
import Glibc
import Spindle
import Testing

@Suite("RunLoop timers")
struct RunLoopTimerTests {
    typealias T = RunLoopTestSupport

    @Test("invalid intervals throw invalidTimerInterval", arguments: [Double.nan, .infinity, -.infinity, -1, -1e-9])
    func invalidIntervals(interval: Double) {
        #expect(throws: SpindleError.self) { try SpindleTimer(interval: interval, repeats: false) { _ in } }
        #expect(throws: SpindleError.self) { try SpindleTimer(interval: .seconds(-1), repeats: true) { _ in } }
    }

    /// Found by the stress binary (timers): two timers due in the same pass, the first invalidating the second
    /// from its handler. The second's firing was already decided, but it had not begun: it must not run.
    @Test("a timer invalidated by another timer's handler in the same pass does not fire", arguments: [false, true])
    func invalidatedBySiblingInTheSamePass(repeats: Bool) throws {
        let secondFired = RLBox(0)
        let firstFired = RLBox(0)
        try T.onNewThread("rl-sibling") {
            let loop = SpindleRunLoop.current
            let second = try SpindleTimer(interval: 0.01, repeats: repeats) { _ in secondFired.withLock { $0 += 1 } }
            let first = try SpindleTimer(interval: 0.01, repeats: repeats) { timer in
                firstFired.withLock { $0 += 1 }
                second.invalidate()
                timer.invalidate()
            }
            try loop.add(first, forMode: .default)
            try loop.add(second, forMode: .default)
            // Busy past both fire dates, so one pass finds both due.
            T.burn(seconds: 0.05)
            try loop.run(until: T.after(0.2))
            first.invalidate()
            second.invalidate()
        }
        #expect(firstFired.withLock { $0 } == 1)
        #expect(secondFired.withLock { $0 } == 0)
    }

    @Test("1,000 timers on one loop fire in fire-date order, each once")
    func thousandTimersFireInOrder() throws {
        let fired = RLBox<[UInt64]>([])
        let scheduled = RLBox<[UInt64]>([])
        try T.onNewThread("rl-1000") {
            let loop = SpindleRunLoop.current
            var generator = SystemRandomNumberGenerator()
            for _ in 0..<1_000 {
                let interval = Double.random(in: 0.001...0.4, using: &generator)
                let fireSlot = RLBox<UInt64>(0)
                let timer = try SpindleTimer(interval: interval, repeats: false) { _ in
                    fired.withLock { $0.append(fireSlot.withLock { $0 }) }
                }
                try loop.add(timer, forMode: .default)
                let fire = try #require(timer.fireDate).uptimeNanoseconds
                fireSlot.withLock { $0 = fire }
                scheduled.withLock { $0.append(fire) }
            }
            try loop.run(until: T.after(30))
        }
        let order = fired.withLock { $0 }
        #expect(order.count == 1_000)
        #expect(order == order.sorted())
        #expect(Set(order) == Set(scheduled.withLock { $0 }))
    }

    @Test("a repeating timer stays on its grid (no cumulative drift) and skips missed firings")
    func repeatingTimerWithoutDrift() throws {
        // Counted, not timed: the loop runs until the timer has fired 10 times (it then invalidates itself and the
        // loop, with nothing left, returns), so a loaded machine only makes the run longer. Each firing takes its
        // own grid slot: a slow callback or a descheduled thread may skip slots, never fire twice in one, never
        // fire early and never move the grid.
        let interval: UInt64 = 50_000_000
        let firings = 10
        let nextFires = RLBox<[UInt64]>([])
        let first = RLBox<UInt64>(0)
        let fireTimes = RLBox<[UInt64]>([])
        try T.onNewThread("rl-drift") {
            let loop = SpindleRunLoop.current
            let timer = try SpindleTimer(interval: 0.05, repeats: true) { timer in
                let count = fireTimes.withLock { $0.append(cshim_clock_monotonic_ns()); return $0.count }
                if let next = timer.fireDate { nextFires.withLock { $0.append(next.uptimeNanoseconds) } }
                T.burn(seconds: 0.01)  // a slow callback must not push later firings back
                if count == 5 { T.burn(seconds: 0.12) }  // misses at least two grid points
                if count == firings { timer.invalidate() }
            }
            try loop.add(timer, forMode: .default)
            first.withLock { $0 = timer.fireDate!.uptimeNanoseconds }
            try loop.run(until: T.after(60))
        }
        let start = first.withLock { $0 }
        let fires = fireTimes.withLock { $0 }
        let nexts = nextFires.withLock { $0 }
        #expect(fires.count == firings)
        #expect(fires.first.map { $0 >= start } == true)  // first firing one interval after scheduling
        for next in nexts { #expect(next > start && (next - start) % interval == 0, "next fire off the grid") }
        #expect(zip(nexts, nexts.dropFirst()).allSatisfy { $0 < $1 })
        let slots = fires.map { $0 >= start ? ($0 - start) / interval : 0 }
        #expect(zip(slots, slots.dropFirst()).allSatisfy { $0 < $1 }, "two firings in one grid slot: \(slots)")
        if fires.count == firings {
            #expect(slots[5] >= slots[4] + 3, "the firing after the long callback caught up: \(slots)")
        }
        for (index, time) in fires.enumerated() {
            #expect(time >= start + UInt64(index) * interval)  // never early, whatever happened before
        }
    }

    @Test("invalidating a timer from another thread wakes the loop, which then has nothing left and returns")
    func timerInvalidationWakesLoop() throws {
        let ready = try SpindleSemaphore(value: 0)
        let timerBox = RLBox<SpindleTimer?>(nil)
        let outcome = RLBox<(Double, Int)>((99, 0))
        let fired = CallRecorder()
        let loopThread = try T.spawn("rl-tinval") {
            let loop = SpindleRunLoop.current
            guard let timer = try? SpindleTimer(interval: 60, repeats: false, handler: { _ in fired.record() })
            else { return }
            try! loop.add(timer, forMode: .default)
            timerBox.withLock { $0 = timer }
            ready.signal()
            let start = cshim_clock_monotonic_ns()
            try? loop.run(until: T.after(10))
            outcome.withLock { $0 = (T.seconds(since: start), 0) }
        }
        #expect(ready.wait(timeout: .seconds(10)))
        let timer = try #require(timerBox.withLock { $0 })
        timer.invalidate()
        #expect(!timer.isValid && timer.fireDate == nil)
        try loopThread.join()
        #expect(outcome.withLock { $0.0 } < 5)
        #expect(fired.count == 0)
    }

    @Test("tolerance is clamped to >= 0; a zero interval is 0.1 ms; adding to a second mode keeps the fire date")
    func toleranceAndModes() throws {
        try T.onNewThread {
            let timer = try SpindleTimer(interval: 0, repeats: false) { _ in }
            timer.tolerance = -3
            guard timer.tolerance == 0 else { throw TestFailure(message: "negative tolerance kept") }
            timer.tolerance = 0.5
            guard timer.tolerance == 0.5, timer.fireDate == nil else { throw TestFailure(message: "tolerance") }
            let slow = try SpindleTimer(interval: 5, repeats: false) { _ in }
            let loop = SpindleRunLoop.current
            try loop.add(slow, forMode: .default)
            let fire = slow.fireDate
            try loop.add(slow, forMode: "other")
            guard slow.fireDate == fire, loop.contains(slow, inMode: "other") else {
                throw TestFailure(message: "second mode moved the fire date")
            }
            slow.invalidate()
            guard !loop.contains(slow, inMode: .default), loop.limitDate(forMode: .default) == nil else {
                throw TestFailure(message: "invalidated timer still scheduled")
            }
            let added = cshim_clock_monotonic_ns()
            try loop.add(timer, forMode: .default)
            // A zero interval is 0.1 ms: the first firing is scheduled at least 0.1 ms after the add.
            guard let zeroFire = timer.fireDate, zeroFire.uptimeNanoseconds >= added + 100_000 else {
                throw TestFailure(message: "a zero interval is not 0.1 ms: fire date \(String(describing: timer.fireDate)), added at \(added)")
            }
            try loop.run(until: T.after(10))
            guard !timer.isValid else { throw TestFailure(message: "one-shot timer still valid after firing") }
        }
    }
}
