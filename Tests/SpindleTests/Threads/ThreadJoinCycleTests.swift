import Spindle
import Testing

/// `join()` cycles: threads that would wait for each other for ever get `joinCycle` instead (glibc refuses only a
/// thread joining itself).
@Suite("SpindleThread join cycles", .timeLimit(.minutes(2)))
struct ThreadJoinCycleTests {
    /// What one thread of a ring saw when it joined the next one.
    enum Outcome: Equatable {
        case joined
        case cycle([String])
        case other(String)
    }

    /// Starts `count` joinable threads named `ring-0`…; once all exist, thread i joins thread i+1 (the last joins
    /// the first). Returns each thread's outcome, once all have ended, and the threads.
    private func runRing(_ count: Int) throws -> ([Outcome], [SpindleThread]) {
        let threads = SpindleLockedValue<[SpindleThread]>([])
        let outcomes = SpindleLockedValue<[Int: Outcome]>([:])
        let go = OracleSemaphore()
        let done = OracleSemaphore()
        for index in 0..<count {
            let thread = try SpindleThread.spawnJoinable(name: "ring-\(index)") {
                _ = go.wait()
                let next = threads.withLockedValue { $0[(index + 1) % count] }
                let outcome: Outcome
                do throws(SpindleError) {
                    try next.join()
                    outcome = .joined
                } catch {
                    if case .joinCycle(let names) = error { outcome = .cycle(names) } else { outcome = .other("\(error)") }
                }
                outcomes.withLockedValue { $0[index] = outcome }
                done.post()
            }
            threads.withLockedValue { $0.append(thread) }
        }
        for _ in 0..<count { go.post() }
        for _ in 0..<count { #expect(done.wait(), "a thread of the ring did not end: the join cycle hung") }
        let seen = outcomes.value
        return ((0..<count).map { seen[$0] ?? .other("no outcome") }, threads.value)
    }

    @Test("threads joining each other in a ring of 2 or 3: the join that closes the ring throws, the others return",
          arguments: [2, 3])
    func ring(count: Int) throws {
        let (outcomes, threads) = try self.runRing(count)
        let refused = outcomes.indices.filter { if case .cycle = outcomes[$0] { true } else { false } }
        #expect(refused.count == 1, "outcomes: \(outcomes)")
        #expect(outcomes.filter { $0 == .joined }.count == count - 1, "outcomes: \(outcomes)")
        guard let closer = refused.first else { return }
        // The chain runs from the refused thread round the ring back to it.
        let expected = (0...count).map { "ring-\((closer + $0) % count)" }
        #expect(outcomes[closer] == .cycle(expected))
        // The refused join changed nothing: the thread it named is still joinable; every other was joined.
        let unclaimed = (closer + 1) % count
        try threads[unclaimed].join()
        for index in threads.indices where index != unclaimed {
            expectSpindleError(.threadAlreadyJoined(name: "ring-\(index)")) { try threads[index].join() }
        }
    }

    @Test("a chain of joins that closes no cycle waits as before")
    func chainWithoutCycle() throws {
        let release = OracleSemaphore()
        let last = try SpindleThread.spawnJoinable(name: "chain-last") { _ = release.wait() }
        let errors = SpindleLockedValue<[String]>([])
        let waiting = OracleSemaphore()
        let middle = try SpindleThread.spawnJoinable(name: "chain-middle") {
            waiting.post()
            do throws(SpindleError) { try last.join() } catch { errors.withLockedValue { $0.append("\(error)") } }
        }
        let first = try SpindleThread.spawnJoinable(name: "chain-first") {
            waiting.post()
            do throws(SpindleError) { try middle.join() } catch { errors.withLockedValue { $0.append("\(error)") } }
        }
        #expect(waiting.wait() && waiting.wait())
        release.post()
        try first.join()
        #expect(errors.value.isEmpty)
        #expect(last.isFinished && middle.isFinished)
    }
}
