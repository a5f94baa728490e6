import Glibc
import Spindle
import Testing

@Suite("SpindleCondition", .timeLimit(.minutes(2)))
struct ConditionTests {
    /// Starts `count` waiters that each take one token (looping on "no token yet"), and returns once every
    /// waiter is inside `wait`: a waiter posts `ready` while holding the mutex, which `wait` releases only
    /// atomically with going to sleep, so once the caller gets the mutex after all posts, all are waiting.
    private func startTokenWaiters(_ count: Int, condition: SpindleCondition, tokens: UnguardedBox<Int>,
                                   finished: OracleSemaphore, results: SpindleLockedValue<[Bool]>)
        throws -> [SpindleThread]
    {
        let ready = OracleSemaphore()
        let threads = try (0..<count).map { _ in
            try SpindleThread.spawnJoinable(name: "cond-waiter") {
                condition.lock()
                ready.post()
                let got = condition.wait(until: .after(.seconds(10))) { tokens.value == 0 }
                if got { tokens.value -= 1 }
                condition.unlock()
                results.withLockedValue { $0.append(got) }
                finished.post()
            }
        }
        for _ in 0..<count { #expect(ready.wait()) }
        condition.withLock {}  // every waiter has released the mutex: each is asleep in wait
        return threads
    }

    @Test("signal wakes one waiter per token; each waiter loops on its predicate")
    func signalWakesOne() throws {
        let condition = SpindleCondition()
        let tokens = UnguardedBox(0)
        let finished = OracleSemaphore()
        let results = SpindleLockedValue<[Bool]>([])
        let waiters = try startTokenWaiters(3, condition: condition, tokens: tokens, finished: finished,
                                            results: results)
        for round in 1...3 {
            condition.withLock {
                tokens.value += 1
                condition.signal()
            }
            #expect(finished.wait(), "a signal did not wake a waiter in round \(round)")
            // Exactly one waiter took the token: the others are still waiting (there is nothing for them).
            #expect(condition.withLock { tokens.value } == 0)
            #expect(results.value.count == round)
        }
        for waiter in waiters { try waiter.join() }
        #expect(results.value == [true, true, true])
    }

    @Test("broadcast wakes every waiter")
    func broadcastWakesAll() throws {
        let condition = SpindleCondition()
        let open = UnguardedBox(false)
        let ready = OracleSemaphore()
        let results = SpindleLockedValue<[Bool]>([])
        let count = 5
        let waiters = try (0..<count).map { _ in
            try SpindleThread.spawnJoinable(name: "cond-bcast") {
                condition.lock()
                ready.post()
                let deadline = SpindleDeadline.after(.seconds(10))
                var woke = true
                while !open.value {
                    // Not wait(until:while:): after its deadline it reports the predicate, which is true by then.
                    if !condition.wait(until: deadline) { woke = open.value && !deadline.hasPassed; break }
                }
                condition.unlock()
                results.withLockedValue { $0.append(woke) }
            }
        }
        for _ in 0..<count { #expect(ready.wait()) }
        condition.lock()  // all waiters are asleep (see startTokenWaiters)
        open.value = true
        condition.broadcast()  // a single broadcast: a signal would leave all but one to time out
        condition.unlock()
        for waiter in waiters { try waiter.join() }
        #expect(results.value == Array(repeating: true, count: count))
    }

    @Test("signal and broadcast without the mutex held still wake a waiter")
    func signalWithoutMutex() throws {
        let condition = SpindleCondition()
        let flag = UnguardedBox(false)
        let ready = OracleSemaphore()
        let result = SpindleLockedValue(false)
        let waiter = try SpindleThread.spawnJoinable(name: "cond-nolock") {
            condition.lock()
            ready.post()
            let woke = condition.wait(until: .after(.seconds(10))) { !flag.value }
            condition.unlock()
            result.withLockedValue { $0 = woke }
        }
        #expect(ready.wait())
        condition.withLock { flag.value = true }
        condition.signal()
        try waiter.join()
        #expect(result.value)
    }

    @Test("a timed wait times out no earlier than its deadline", arguments: [1, 20, 100])
    func timedWaitLowerBound(milliseconds: Int) {
        let condition = SpindleCondition()
        condition.lock()
        let before = monotonicNanoseconds()
        let deadline = SpindleDeadline.after(.milliseconds(milliseconds))
        // A true result may be spurious: loop until the wait reports the deadline.
        while condition.wait(until: deadline) {}
        let after = monotonicNanoseconds()
        condition.unlock()
        #expect(after >= deadline.uptimeNanoseconds)
        #expect(after - before >= UInt64(milliseconds) * 1_000_000)
        #expect(deadline.hasPassed)
    }

    @Test("wait(until:while:) returns false after its deadline when the predicate never changes")
    func predicateWaitTimesOut() {
        let condition = SpindleCondition()
        let deadline = SpindleDeadline.after(.milliseconds(30))
        let result = condition.withLock { condition.wait(until: deadline) { true } }
        #expect(result == false)
        #expect(monotonicNanoseconds() >= deadline.uptimeNanoseconds)
    }

    @Test("wait(until:while:) returns true at once when the predicate is already false")
    func predicateAlreadyFalse() {
        let condition = SpindleCondition()
        let result = condition.withLock { condition.wait(until: .distantFuture) { false } }
        #expect(result)
    }

    @Test("a wait until a past deadline returns false promptly",
          arguments: [SpindleDeadline(uptimeNanoseconds: 0), SpindleDeadline(uptimeNanoseconds: 1)])
    func pastDeadline(deadline: SpindleDeadline) throws {
        let condition = SpindleCondition()
        let done = OracleSemaphore()
        let results = SpindleLockedValue<[Bool]>([])
        // On a thread, so that a wait that blocks shows up as a failure (10 s) rather than a hang.
        let waiter = try SpindleThread.spawnJoinable(name: "cond-past") {
            condition.lock()
            let plain = condition.wait(until: deadline)
            let now = condition.wait(until: .now)
            let predicate = condition.wait(until: deadline) { true }
            condition.unlock()
            results.withLockedValue { $0 = [plain, now, predicate] }
            done.post()
        }
        #expect(done.wait(), "a wait with a past deadline blocked")
        try waiter.join()
        #expect(results.value == [false, false, false])
    }

    @Test("conditions sharing one mutex: waiting on one releases the lock the other uses")
    func sharedMutex() throws {
        let mutex = SpindleMutex()
        let notEmpty = SpindleCondition(sharing: mutex)
        let notFull = SpindleCondition(sharing: mutex)
        #expect(notEmpty.mutex === mutex && notFull.mutex === mutex)
        let items = UnguardedBox<[Int]>([])
        let capacity = 2, total = 2_000
        let received = SpindleLockedValue<[Int]>([])
        let consumer = try SpindleThread.spawnJoinable(name: "cond-consumer") {
            var got: [Int] = []
            while got.count < total {
                let item: Int? = notEmpty.withLock {
                    guard notEmpty.wait(until: .after(.seconds(10)), while: { items.value.isEmpty }) else { return nil }
                    notFull.signal()
                    return items.value.removeFirst()
                }
                guard let item else { break }
                got.append(item)
            }
            received.withLockedValue { $0 = got }
        }
        var stalled = false
        for item in 0..<total where !stalled {
            notFull.withLock {
                if notFull.wait(until: .after(.seconds(10)), while: { items.value.count >= capacity }) {
                    items.value.append(item)
                    notEmpty.signal()
                } else {
                    stalled = true
                }
            }
        }
        try consumer.join()
        #expect(!stalled)
        #expect(received.value == Array(0..<total))  // in order, none lost, none duplicated
    }

    @Test("the condition's mutex is a normal mutex and lock/unlock go through it")
    func exposesItsMutex() throws {
        let condition = SpindleCondition()
        #expect(condition.mutex.kind == .normal)
        condition.lock()
        let taken = SpindleLockedValue<Bool?>(nil)
        let probe = try SpindleThread.spawnJoinable(name: "cond-probe") {
            let got = condition.mutex.tryLock()
            if got { condition.mutex.unlock() }
            taken.withLockedValue { $0 = got }
        }
        try probe.join()
        condition.unlock()
        #expect(taken.value == false)
    }
}
