import Glibc
import Spindle
import Testing

@Suite("SpindleLockedValue", .timeLimit(.minutes(2)))
struct LockedValueTests {
    @Test("mutual exclusion under contention: a million increments, exact count", arguments: [2, 4])
    func contention(threads: Int) throws {
        let box = SpindleLockedValue(0)
        let perThread = 1_000_000 / threads
        let start = OracleSemaphore()
        try runJoinableThreads(threads, name: "locked") { _ in
            _ = start.wait()
            for _ in 0..<perThread { box.withLockedValue { $0 += 1 } }
        } beforeJoining: {
            for _ in 0..<threads { start.post() }
        }
        #expect(box.value == 1_000_000)
    }

    @Test("a compound update is atomic: read-modify-write of a struct")
    func compoundUpdates() throws {
        struct Account { var debit = 0, credit = 0 }
        let box = SpindleLockedValue(Account())
        let bad = SpindleLockedValue(0)
        try runJoinableThreads(4, name: "locked-acct") { _ in
            for _ in 0..<50_000 {
                let balanced = box.withLockedValue { account -> Bool in
                    let ok = account.debit == account.credit  // no one sees a half-done update
                    account.debit += 1
                    account.credit += 1
                    return ok
                }
                if !balanced { bad.withLockedValue { $0 += 1 } }
            }
        }
        #expect(bad.value == 0)
        let account = box.value
        #expect(account.debit == 200_000 && account.credit == 200_000)
    }

    @Test("withLockedValue returns the body's result and rethrows its error, releasing the lock")
    func resultAndThrow() throws {
        struct Boom: Error {}
        let box = SpindleLockedValue([1, 2, 3])
        #expect(box.withLockedValue { $0.reduce(0, +) } == 6)
        #expect(throws: Boom.self) {
            try box.withLockedValue { values throws(Boom) -> Void in
                values.append(4)
                throw Boom()
            }
        }
        // The mutation before the throw stays; the lock was released (another thread can take it).
        let seen = SpindleLockedValue<[Int]>([])
        try runJoinableThreads(1, name: "locked-after") { _ in seen.withLockedValue { $0 = box.value } }
        #expect(seen.value == [1, 2, 3, 4])
    }

    @Test("a non-copyable value can be held and mutated in place")
    func nonCopyable() throws {
        struct Token: ~Copyable {
            var uses = 0
        }
        let box = SpindleLockedValue(Token())
        try runJoinableThreads(4, name: "locked-nc") { _ in
            for _ in 0..<10_000 { box.withLockedValue { $0.uses += 1 } }
        }
        #expect(box.withLockedValue { $0.uses } == 40_000)
    }
}
