import Glibc
@testable import Spindle
import Testing

@Suite("SpindleSemaphore", .timeLimit(.minutes(2)))
struct SemaphoreTests {
    @Test("a negative initial value throws negativeSemaphoreValue", arguments: [-1, -42, Int.min])
    func negativeValueThrows(value: Int) {
        expectSpindleError(.negativeSemaphoreValue(value)) { _ = try SpindleSemaphore(value: value) }
    }

    @Test("value N: N waits succeed without blocking, the next poll fails", arguments: [0, 1, 5, 100])
    func counting(permits: Int) throws {
        let semaphore = try SpindleSemaphore(value: permits)
        #expect(semaphore.value == permits)
        for taken in 0..<permits {
            #expect(semaphore.wait(timeout: .zero), "wait \(taken + 1) of \(permits) failed")
        }
        #expect(semaphore.wait(timeout: .zero) == false)
        #expect(semaphore.value == 0)
    }

    @Test("signal with nobody waiting keeps the permit and returns false")
    func signalWithoutWaiter() throws {
        let semaphore = try SpindleSemaphore()
        #expect(semaphore.signal() == false)
        #expect(semaphore.signal() == false)
        #expect(semaphore.value == 2)
        semaphore.wait()  // a permit is free: does not block
        #expect(semaphore.wait(until: .now))
        #expect(semaphore.value == 0)
    }

    @Test("zero, negative and past timeouts only poll", arguments: [Duration.zero, .nanoseconds(-1), .seconds(-5)])
    func pollingTimeouts(timeout: Duration) throws {
        let semaphore = try SpindleSemaphore()
        let before = monotonicNanoseconds()
        #expect(semaphore.wait(timeout: timeout) == false)
        #expect(semaphore.wait(until: SpindleDeadline(uptimeNanoseconds: 0)) == false)
        #expect(semaphore.wait(until: .now) == false)
        // No upper bound is asserted on how long the polls took; the deadline must merely not lie ahead.
        #expect(SpindleDeadline.after(timeout).uptimeNanoseconds >= before)
        semaphore.signal()
        #expect(semaphore.wait(timeout: timeout))  // a free permit is taken even by a poll
        #expect(semaphore.value == 0)
    }

    @Test("a timed-out wait waits at least its timeout and keeps the permit count right")
    func timeoutKeepsCount() throws {
        let semaphore = try SpindleSemaphore()
        let before = monotonicNanoseconds()
        #expect(semaphore.wait(timeout: .milliseconds(50)) == false)
        #expect(monotonicNanoseconds() - before >= 50_000_000)
        let deadline = SpindleDeadline.after(.milliseconds(10))
        #expect(semaphore.wait(until: deadline) == false)
        #expect(monotonicNanoseconds() >= deadline.uptimeNanoseconds)
        // The timed-out waiters left: nobody is parked, so the signal keeps its permit.
        #expect(semaphore.signal() == false)
        #expect(semaphore.value == 1)
        #expect(semaphore.wait(timeout: .zero))
        #expect(semaphore.value == 0)
    }

    @Test("a waiter parked before a signal gets the permit; a newcomer cannot steal it (1000 rounds)")
    func stolenWakeup() throws {
        let rounds = 1000
        let semaphore = try SpindleSemaphore()
        let arriving = OracleSemaphore()
        let finished = OracleSemaphore()
        let results = SpindleLockedValue<[Bool]>([])
        let waiter = try SpindleThread.spawnJoinable(name: "sem-parked") {
            for _ in 0..<rounds {
                arriving.post()  // the next thing this thread does is wait()
                let got = semaphore.wait(timeout: .seconds(10))
                results.withLockedValue { $0.append(got) }
                finished.post()
            }
        }
        var notParked = 0, stolen = 0, notWoken = 0
        for _ in 0..<rounds {
            try #require(arriving.wait())
            // Registered as parked inside the semaphore (read under its lock; a thread seen asleep in /proc could
            // still be on its way there, blocked in some other lock).
            try #require(waitUntilParked(semaphore, count: 1))
            if !semaphore.signal() { notParked += 1 }
            if semaphore.wait(timeout: .zero) {
                stolen += 1
                semaphore.signal()  // give the waiter its permit back so the rounds go on
            }
            if !finished.wait() { notWoken += 1 }
        }
        try waiter.join()
        #expect(notParked == 0, "signal() did not report a parked waiter")
        #expect(notWoken == 0, "the parked waiter was not woken")
        #expect(results.value == Array(repeating: true, count: rounds))
        #expect(semaphore.value == 0)
        #expect(stolen == 0, "a newcomer's wait(timeout: .zero) took the permit signalled to the parked waiter")
    }

    /// A thread parked in `semaphore.wait(timeout:)`: returns once the semaphore lists it as parked. `done` is posted
    /// after the wait returns, with the result appended to `results` under `label`.
    private func park(_ semaphore: SpindleSemaphore, _ label: String, timeout: Duration, done: OracleSemaphore,
                      results: SpindleLockedValue<[String]>) throws -> SpindleThread {
        let arriving = OracleSemaphore()
        let parkedBefore = parkedWaiters(semaphore)
        let thread = try SpindleThread.spawnJoinable(name: "sem-\(label)") {
            arriving.post()
            let got = semaphore.wait(timeout: timeout)
            results.withLockedValue { $0.append("\(label):\(got)") }
            done.post()
        }
        #expect(arriving.wait())
        #expect(waitUntilParked(semaphore, count: parkedBefore + 1))
        return thread
    }

    @Test("the oldest parked waiter is served first; a waiter that timed out is skipped, its permit not lost")
    func fifoAndAbandoned() throws {
        let semaphore = try SpindleSemaphore()
        let done = OracleSemaphore()
        let results = SpindleLockedValue<[String]>([])
        let first = try park(semaphore, "first", timeout: .seconds(10), done: done, results: results)
        let quitter = try park(semaphore, "quitter", timeout: .milliseconds(20), done: done, results: results)
        #expect(done.wait())  // the quitter timed out: nobody signalled yet
        let second = try park(semaphore, "second", timeout: .seconds(10), done: done, results: results)
        let third = try park(semaphore, "third", timeout: .seconds(10), done: done, results: results)
        for expected in ["first", "second", "third"] {
            #expect(semaphore.signal(), "no parked waiter for \(expected)")
            #expect(done.wait(), "\(expected) was not woken")
        }
        for thread in [first, quitter, second, third] { try thread.join() }
        #expect(results.value == ["quitter:false", "first:true", "second:true", "third:true"])
        #expect(semaphore.signal() == false)  // nobody left: the permit stays
        #expect(semaphore.value == 1)
    }

    @Test("permits are conserved under contention: every signal is taken by exactly one wait")
    func contention() throws {
        let semaphore = try SpindleSemaphore()
        let consumers = 4, perConsumer = 5_000
        let taken = SpindleLockedValue(0)
        let failures = SpindleLockedValue(0)
        let threads = try (0..<consumers).map { _ in
            try SpindleThread.spawnJoinable(name: "sem-consumer") {
                for _ in 0..<perConsumer {
                    if semaphore.wait(timeout: .seconds(10)) {
                        taken.withLockedValue { $0 += 1 }
                    } else {
                        failures.withLockedValue { $0 += 1 }
                    }
                }
            }
        }
        let producers = try (0..<2).map { _ in
            try SpindleThread.spawnJoinable(name: "sem-producer") {
                for _ in 0..<(consumers * perConsumer / 2) { semaphore.signal() }
            }
        }
        for thread in producers + threads { try thread.join() }
        #expect(failures.value == 0)
        #expect(taken.value == consumers * perConsumer)
        #expect(semaphore.value == 0)
    }

    @Test("with two waiters always in line, the served prefix is dropped: storage stays bounded (issue 23)")
    func storageBoundedWithTwoLiveWaiters() throws {
        // Both waiters are parked before every signal, so the line is never empty: the served prefix must be
        // dropped in batches or `parked` grows by one node per wait (100,002 nodes after 100,000 signals).
        let signals = 20_000
        let semaphore = try SpindleSemaphore()
        let stop = SpindleLockedValue(false)
        let woken = SpindleLockedValue(0)
        let threads = try (0..<2).map { index in
            try SpindleThread.spawnJoinable(name: "sem-line\(index)") {
                while true {
                    semaphore.wait()
                    woken.withLockedValue { $0 += 1 }
                    if stop.value { return }
                }
            }
        }
        var maxStored = 0, maxLive = 0, notParked = 0
        for round in 0..<signals {
            try #require(waitUntilParkedYielding(semaphore, count: 2), "round \(round): the waiters did not park")
            let (stored, live) = semaphore.condition.withLock {
                (semaphore.parked.count, semaphore.parked.count - semaphore.parkedHead)
            }
            maxStored = max(maxStored, stored)
            maxLive = max(maxLive, live)
            if !semaphore.signal() { notParked += 1 }
        }
        try #require(waitUntilParkedYielding(semaphore, count: 2))
        let storedAtEnd = semaphore.condition.withLock { semaphore.parked.count }
        stop.withLockedValue { $0 = true }
        semaphore.signal()
        semaphore.signal()
        for thread in threads { try thread.join() }
        #expect(notParked == 0, "signal() found nobody parked although two waiters were")
        #expect(woken.value == signals + 2)
        #expect(maxLive <= 2, "more waiters in line than threads waiting")
        // Served nodes are dropped once more than `compactAfter` (64) pile up: at most 64 + 2 stored.
        let bound = SpindleSemaphore.compactAfter + 2
        #expect(maxStored <= bound, "parked grew to \(maxStored) nodes for 2 live waiters")
        #expect(storedAtEnd <= bound, "parked holds \(storedAtEnd) nodes for 2 live waiters")
        #expect(semaphore.value == 0)
        #expect(parkedWaiters(semaphore) == 0)
    }

    @Test("signal from another thread wakes a blocked wait()")
    func wakesBlockedWait() throws {
        let semaphore = try SpindleSemaphore()
        let ready = OracleSemaphore()
        let done = OracleSemaphore()
        let waiter = try SpindleThread.spawnJoinable(name: "sem-block") {
            ready.post()
            semaphore.wait()
            done.post()
        }
        #expect(ready.wait())
        try #require(waitUntilParked(semaphore, count: 1))
        #expect(semaphore.signal())
        #expect(done.wait(), "signal() reported a woken waiter but wait() did not return")
        try waiter.join()
        #expect(semaphore.value == 0)
    }
}

@Suite("SpindleDeadline")
struct DeadlineTests {
    /// `body()` lies within [before, after] of CLOCK_MONOTONIC read around it.
    private func expectNowish(_ body: () throws -> SpindleDeadline, sourceLocation: SourceLocation = #_sourceLocation)
        rethrows
    {
        let before = monotonicNanoseconds()
        let deadline = try body()
        let after = monotonicNanoseconds()
        #expect(deadline.uptimeNanoseconds >= before && deadline.uptimeNanoseconds <= after,
                sourceLocation: sourceLocation)
    }

    @Test("after(seconds: .nan) throws invalidTimeout", arguments: [Double.nan, -Double.nan, .signalingNaN])
    func nanThrows(value: Double) {
        expectSpindleError(.invalidTimeout) { _ = try SpindleDeadline.after(seconds: value) }
    }

    @Test("after(seconds:) saturates huge and infinite timeouts to distantFuture",
          arguments: [Double.infinity, 1e300, 1.8e10, Double.greatestFiniteMagnitude])
    func hugeSecondsSaturate(value: Double) throws {
        #expect(try SpindleDeadline.after(seconds: value) == .distantFuture)
    }

    @Test("after(seconds:) with zero, negative or -infinity is now", arguments: [0, -0.0, -1, -1e300, -Double.infinity])
    func nonPositiveSecondsAreNow(value: Double) throws {
        try expectNowish { try SpindleDeadline.after(seconds: value) }
    }

    @Test("after(seconds:) with a finite timeout lands that far ahead")
    func finiteSeconds() throws {
        let before = monotonicNanoseconds()
        let deadline = try SpindleDeadline.after(seconds: 2.5)
        let after = monotonicNanoseconds()
        #expect(deadline.uptimeNanoseconds >= before + 2_499_999_000)  // 2.5e9 may round down by a nanosecond
        #expect(deadline.uptimeNanoseconds <= after + 2_500_000_000)
        #expect(!deadline.hasPassed)
    }

    @Test("after(Duration) saturates huge durations to distantFuture",
          arguments: [Duration.seconds(Int64.max), .seconds(Int64(UInt64.max / 1_000_000_000)),
                      .seconds(1 << 62), .seconds(Int64(UInt64.max / 1_000_000_000) - 1)])
    func hugeDurationSaturates(timeout: Duration) {
        #expect(SpindleDeadline.after(timeout) == .distantFuture)
    }

    @Test("after(Duration) with zero or negative durations is now",
          arguments: [Duration.zero, .nanoseconds(-1), .milliseconds(-1), .seconds(-1), .seconds(Int64.min)])
    func nonPositiveDurationsAreNow(timeout: Duration) {
        expectNowish { SpindleDeadline.after(timeout) }
    }

    @Test("after(Duration) keeps sub-second parts", arguments: [Duration.nanoseconds(1), .nanoseconds(1_500),
                                                                .milliseconds(1_250), .seconds(3)])
    func finiteDuration(timeout: Duration) {
        let (seconds, attoseconds) = timeout.components
        let nanoseconds = UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
        let before = monotonicNanoseconds()
        let deadline = SpindleDeadline.after(timeout)
        let after = monotonicNanoseconds()
        #expect(deadline.uptimeNanoseconds >= before + nanoseconds)
        #expect(deadline.uptimeNanoseconds <= after + nanoseconds)
    }

    @Test("hasPassed and remaining")
    func passedAndRemaining() {
        let past = SpindleDeadline(uptimeNanoseconds: 1)
        #expect(past.hasPassed)
        #expect(past.remaining == .zero)
        #expect(!SpindleDeadline.distantFuture.hasPassed)
        #expect(SpindleDeadline.distantFuture.remaining > .seconds(1_000_000))
        let ahead = SpindleDeadline.after(.seconds(100))
        #expect(ahead.remaining <= .seconds(100))
        #expect(ahead.remaining > .seconds(50))
        #expect(past < SpindleDeadline.now && SpindleDeadline.now < .distantFuture)
        #expect(SpindleDeadline.distantFuture.description == "distantFuture")
    }
}

/// Waiters registered as parked in `semaphore` (read under its lock).
private func parkedWaiters(_ semaphore: SpindleSemaphore) -> Int {
    semaphore.condition.withLock { semaphore.parked.count - semaphore.parkedHead }
}

/// Polls (with the shared deadline) until `semaphore` has `count` parked waiters.
private func waitUntilParked(_ semaphore: SpindleSemaphore, count: Int) -> Bool {
    waitUntil(deadline: 10) { parkedWaiters(semaphore) == count }
}

/// Like `waitUntilParked`, but gives the CPU away with `sched_yield` between looks instead of sleeping 200 µs, for
/// tests that wait for a park thousands of times (the thread about to park may need this CPU). Polls the
/// semaphore's own state under its lock; fails after 10 s.
private func waitUntilParkedYielding(_ semaphore: SpindleSemaphore, count: Int) -> Bool {
    let end = monotonicNanoseconds() + 10_000_000_000
    while parkedWaiters(semaphore) != count {
        if monotonicNanoseconds() >= end { return parkedWaiters(semaphore) == count }
        sched_yield()
    }
    return true
}
