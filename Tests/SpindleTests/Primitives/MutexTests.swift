import Glibc
import Spindle
import Testing

@Suite("SpindleMutex", .timeLimit(.minutes(2)))
struct MutexTests {
    static let threads = 4
    static let incrementsPerThread = 250_000  // 1,000,000 in all

    @Test("mutual exclusion under contention", arguments: [SpindleMutex.Kind.normal, .recursive, .errorChecking])
    func contention(kind: SpindleMutex.Kind) throws {
        let mutex = SpindleMutex(kind)
        let counter = UnguardedBox(0)
        let start = OracleSemaphore()
        try runJoinableThreads(Self.threads) { _ in
            _ = start.wait()  // start together so the increments really interleave
            for _ in 0..<Self.incrementsPerThread {
                mutex.lock()
                counter.value += 1
                mutex.unlock()
            }
        } beforeJoining: {
            for _ in 0..<Self.threads { start.post() }
        }
        #expect(counter.value == Self.threads * Self.incrementsPerThread)
        #expect(mutex.kind == kind)
    }

    @Test("withLock under contention returns the body's value and excludes")
    func withLockContention() throws {
        let mutex = SpindleMutex()
        let counter = UnguardedBox(0)
        let sums = SpindleLockedValue(0)
        try runJoinableThreads(Self.threads) { _ in
            var sum = 0
            for _ in 0..<Self.incrementsPerThread {
                sum += mutex.withLock { () -> Int in
                    counter.value += 1
                    return counter.value
                }
            }
            sums.withLockedValue { $0 += sum }
        }
        // Every value 1...n was returned exactly once, so the returned values add up to n(n+1)/2.
        let n = Self.threads * Self.incrementsPerThread
        #expect(counter.value == n)
        #expect(sums.value == n * (n + 1) / 2)
    }

    @Test("a recursive mutex can be relocked by its owner, under contention")
    func recursiveRelockUnderContention() throws {
        let mutex = SpindleMutex(.recursive)
        let counter = UnguardedBox(0)
        try runJoinableThreads(Self.threads) { _ in
            for _ in 0..<Self.incrementsPerThread {
                mutex.lock()
                mutex.lock()  // would deadlock on a normal mutex
                counter.value += 1
                mutex.unlock()
                mutex.unlock()
            }
        }
        #expect(counter.value == Self.threads * Self.incrementsPerThread)
    }

    @Test("a recursive mutex stays held until unlocked as often as it was locked")
    func recursiveDepth() throws {
        let mutex = SpindleMutex(.recursive)
        mutex.lock()
        #expect(mutex.tryLock())  // the owner relocks without blocking
        mutex.withLock { mutex.withLock {} }
        mutex.unlock()
        // Still held once: another thread must fail to take it.
        #expect(try tryLockFromAnotherThread(mutex) == false)
        mutex.unlock()
        #expect(try tryLockFromAnotherThread(mutex) == true)
    }

    @Test("tryLock fails while another thread holds the mutex, and succeeds once it is released",
          arguments: [SpindleMutex.Kind.normal, .recursive, .errorChecking])
    func tryLockWhileHeld(kind: SpindleMutex.Kind) throws {
        let mutex = SpindleMutex(kind)
        let held = OracleSemaphore()
        let release = OracleSemaphore()
        let holder = try SpindleThread.spawnJoinable(name: "holder") {
            mutex.lock()
            held.post()
            _ = release.wait()
            mutex.unlock()
        }
        #expect(held.wait())
        #expect(mutex.tryLock() == false)
        #expect(mutex.tryLock() == false)
        release.post()
        try holder.join()
        #expect(mutex.tryLock())
        mutex.unlock()
    }

    @Test("withLock releases the mutex when the body throws")
    func withLockReleasesOnThrow() throws {
        struct Boom: Error {}
        let mutex = SpindleMutex()
        #expect(throws: Boom.self) { try mutex.withLock { throw Boom() } }
        #expect(try tryLockFromAnotherThread(mutex) == true)
        #expect(mutex.tryLock())
        mutex.unlock()
    }

    @Test("relocking an error-checking mutex traps instead of deadlocking")
    func errorCheckingRelockTraps() async {
        await #expect(processExitsWith: .failure) {
            let mutex = SpindleMutex(.errorChecking)
            mutex.lock()
            mutex.lock()
        }
    }

    /// Issue 19: the documentation said `tryLock` traps on an error-checking mutex's misuse; by its owner it
    /// returns false (only `lock` and `unlock` trap), and the mutex stays held once.
    @Test("tryLock by the owner of an error-checking mutex returns false instead of trapping")
    func errorCheckingTryLockByOwnerReturnsFalse() throws {
        let mutex = SpindleMutex(.errorChecking)
        mutex.lock()
        #expect(mutex.tryLock() == false)
        #expect(try tryLockFromAnotherThread(mutex) == false)
        mutex.unlock()
        #expect(try tryLockFromAnotherThread(mutex) == true)
    }

    @Test("unlocking an error-checking mutex that is not held traps")
    func errorCheckingUnlockTraps() async {
        await #expect(processExitsWith: .failure) {
            let mutex = SpindleMutex(.errorChecking)
            mutex.unlock()
        }
    }
}

/// `tryLock` from a fresh thread; unlocks again if it got the mutex. Returns whether it got it.
private func tryLockFromAnotherThread(_ mutex: SpindleMutex) throws -> Bool {
    let result = SpindleLockedValue<Bool?>(nil)
    let thread = try SpindleThread.spawnJoinable(name: "trylock") {
        let got = mutex.tryLock()
        if got { mutex.unlock() }
        result.withLockedValue { $0 = got }
    }
    try thread.join()
    return try #require(result.value as Bool?)
}
