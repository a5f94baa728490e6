import Glibc
import Spindle
import Synchronization
import Testing

@Suite("SpindleThreadLocal", .timeLimit(.minutes(2)))
struct ThreadLocalTests {
    @Test("each thread sees its own value, made by initial the first time it reads")
    func perThreadValues() throws {
        let made = Atomic<Int>(0)
        let local = SpindleThreadLocal<Int>(initial: {
            made.add(1, ordering: .relaxed)
            return -1
        })
        let seen = SpindleLockedValue<[Int: [Int]]>([:])
        let start = OracleSemaphore()
        let count = 8
        try runJoinableThreads(count, name: "tls") { index in
            _ = start.wait()  // all threads are alive at once, so their slots coexist
            var trace = [local.value]  // -1: fresh
            local.value = index
            for _ in 0..<1_000 { local.value += 1 }
            trace.append(local.value)
            seen.withLockedValue { $0[index] = trace }
        } beforeJoining: {
            for _ in 0..<count { start.post() }
        }
        for index in 0..<count { #expect(seen.value[index] == [-1, index + 1_000]) }
        #expect(made.load(ordering: .relaxed) == count)  // once per thread, however often it read
        // The test's own thread has a separate slot, untouched by the others.
        #expect(local.value == -1)
        local.value = 7
        #expect(local.value == 7)
        #expect(made.load(ordering: .relaxed) == count + 1)
    }

    @Test("two thread-locals on the same thread are independent")
    func independentKeys() throws {
        let first = SpindleThreadLocal<String>(initial: { "a" })
        let second = SpindleThreadLocal<String>(initial: { "b" })
        let result = SpindleLockedValue<[String]>([])
        try runJoinableThreads(1, name: "tls-keys") { _ in
            first.value = "x"
            result.withLockedValue { $0 = [first.value, second.value] }
        }
        #expect(result.value == ["x", "b"])
    }

    @Test("a thread's value is released when the thread exits")
    func releasedAtThreadExit() throws {
        let local = SpindleThreadLocal<ReleaseSentinel?>(initial: { nil })
        let released = OracleSemaphore()
        let stillHeld = SpindleLockedValue(false)
        try runJoinableThreads(1, name: "tls-release") { _ in
            local.value = ReleaseSentinel(released)
            stillHeld.withLockedValue { $0 = local.value != nil }
        }
        #expect(stillHeld.value)  // held while the thread ran...
        #expect(released.wait(), "the thread-local value was not released at thread exit")  // ...freed at exit
        withExtendedLifetime(local) {}
    }

    @Test("replacing a thread's value releases the old one")
    func replacingReleases() throws {
        let local = SpindleThreadLocal<ReleaseSentinel?>(initial: { nil })
        let released = OracleSemaphore()
        local.value = ReleaseSentinel(released)
        local.value = nil
        #expect(released.wait())
    }

    @Test("values of detached threads are released too")
    func releasedForDetachedThreads() throws {
        let local = SpindleThreadLocal<ReleaseSentinel?>(initial: { nil })
        let released = OracleSemaphore()
        let count = 4
        for _ in 0..<count {
            try SpindleThread.detach(name: "tls-detached") { local.value = ReleaseSentinel(released) }
        }
        for index in 0..<count where !released.wait() {
            Issue.record("value \(index + 1) of \(count) was not released")
            break
        }
        withExtendedLifetime(local) {}
    }
}
