import Spindle
import SpindleHTTPServiceKit
import Synchronization
import Testing

extension EndToEndTests {
    /// End-to-end tests: the service runs in this process on 127.0.0.1 and a free port; async-http-client drives it
    /// at bounded concurrency; every answer is checked against `Oracle`. No test sleeps to synchronise: each waits for
    /// answers, for the service group to return, or for the queue to drain, under a watchdog.
    ///
    /// Work sizes are for debug builds (hashing runs at roughly 50 MB/s there): a 16 MiB hash read twice takes about
    /// half a second, a prime count up to 10^9 by trial division would take hours.
    @Suite struct ServiceTests {
        static let mebibyte = 1 << 20

        /// Every answer of a mixed load is a correct 200 when the load stays within the queue's capacity.
        @Test(.timeLimit(.minutes(2)))
        func correctAnswersUnderBoundedConcurrency() async throws {
            try await withRunningService(
                "correct",
                connections: 8,
                configure: {
                    $0.width = 2
                    $0.capacity = 16
                    $0.deadline = .seconds(60)
                }
            ) { running, probe in
                let path = running.service.dataFile.path
                var expected: [String: String] = [:]
                for (bytes, rounds) in [
                    (0, 1), (1, 1), (65_535, 1), (65_537, 3), (Self.mebibyte, 1), (5 * Self.mebibyte + 7, 2),
                ] {
                    expected["/hash?bytes=\(bytes)&rounds=\(rounds)"] = Oracle.hash(
                        path: path,
                        bytes: bytes,
                        rounds: rounds
                    )
                }
                for limit in [0, 1, 2, 3, 100, 99_991, 1_000_000] {
                    expected["/primes?limit=\(limit)"] = String(Oracle.primeCount(upTo: limit))
                }
                let requests = (0..<3).flatMap { _ in expected.keys.sorted() }
                let replies = try await withWatchdog(.seconds(90), "the mixed load") {
                    await drive(probe, requests, concurrency: 8)
                }
                for reply in replies {
                    let answer = try #require(reply.answer, "no answer: \(reply)")
                    #expect(answer.status == 200, "\(answer.path): \(answer.status) \(answer.body)")
                    #expect(answer.body == expected[answer.path], "\(answer.path): wrong answer")
                }
                #expect(replies.count == requests.count)
                #expect(running.service.tally.counts.completed == requests.count)
            }
        }

        /// Bad parameters are refused with 400 and run nothing.
        @Test(.timeLimit(.minutes(1)))
        func badParametersAnswer400() async throws {
            try await withRunningService("bad", connections: 2, configure: { $0.dataFileSize = 1024 }) {
                running,
                probe in
                for path in [
                    "/hash", "/hash?bytes=-1", "/hash?bytes=1025", "/hash?bytes=10&rounds=0", "/hash?bytes=x",
                    "/primes", "/primes?limit=-5", "/primes?limit=10&deadline_ms=-1",
                ] {
                    let answer = try #require(await probe.get(path).answer)
                    #expect(answer.status == 400, "\(path): \(answer.status)")
                }
                #expect(running.service.executor.queue.snapshot().finished == 0)
            }
        }

        /// More requests at once than the queue holds: the extra ones are answered 503 with Retry-After at once
        /// instead of waiting, the queue never holds more than its capacity, and every accepted one is correct.
        @Test(.timeLimit(.minutes(2)))
        func overloadAnswers503WithRetryAfter() async throws {
            let (width, capacity, clients) = (2, 4, 16)  // 16 requests at once > width + capacity
            try await withRunningService(
                "overload",
                connections: clients,
                configure: {
                    $0.width = width
                    $0.capacity = capacity
                    $0.deadline = .seconds(60)
                    $0.retryAfterSeconds = 3
                }
            ) { running, probe in
                let slow = "/hash?bytes=\(16 * Self.mebibyte)&rounds=2"
                let expected = Oracle.hash(path: running.service.dataFile.path, bytes: 16 * Self.mebibyte, rounds: 2)
                let replies = try await withWatchdog(.seconds(90), "the overload") {
                    await drive(probe, Array(repeating: slow, count: clients), concurrency: clients)
                }
                let answers = try replies.map { try #require($0.answer, "no answer: \($0)") }
                let ok = answers.filter { $0.status == 200 }
                let refused = answers.filter { $0.status == 503 }
                #expect(ok.count + refused.count == clients, "statuses: \(answers.map(\.status))")
                #expect(refused.count >= 1, "no request was refused: the queue took \(ok.count) at once")
                #expect(ok.count >= capacity, "fewer accepted than the queue holds: \(ok.count)")
                for answer in ok { #expect(answer.body == expected) }
                for answer in refused { #expect(answer.retryAfter == "3") }
                let snapshot = running.service.executor.queue.snapshot()
                #expect(snapshot.highWaterOperationCount <= capacity, "\(snapshot)")
                #expect(snapshot.highWaterExecuting <= width, "\(snapshot)")
                #expect(snapshot.rejected == refused.count, "\(snapshot)")
                #expect(running.service.tally.counts.refusedFull == refused.count)
            }
        }

        /// A request whose deadline passes is answered 504 when it passes, and its work is cancelled: running work
        /// stops early (the queue drains in seconds where the work would take hours), waiting work never starts.
        @Test(.timeLimit(.minutes(2)))
        func missedDeadlineAnswers504AndCancelsTheWork() async throws {
            try await withRunningService(
                "deadline",
                connections: 4,
                configure: {
                    $0.width = 1
                    $0.capacity = 4
                    $0.deadline = .seconds(60)
                }
            ) { running, probe in
                let queue = running.service.executor.queue
                // A holds the only thread with hours of work; B waits behind it with a shorter deadline.
                let a = "/primes?limit=1000000000&deadline_ms=2000"
                let b = "/hash?bytes=4096&deadline_ms=200"
                let (first, second) = try await withWatchdog(.seconds(60), "the late requests") {
                    try await withThrowingTaskGroup(of: Reply.self) { group in
                        group.addTask { await probe.get(a) }
                        try await waitUntil("A holds the queue's thread") { queue.snapshot().executing == 1 }
                        group.addTask { await probe.get(b) }
                        let first = try #require(try await group.next())
                        let second = try #require(try await group.next())
                        return (first, second)
                    }
                }
                let firstAnswer = try #require(first.answer)
                let secondAnswer = try #require(second.answer)
                #expect(firstAnswer.path == b, "the waiting request was not answered first, at its own deadline")
                #expect(firstAnswer.status == 504 && secondAnswer.status == 504)
                #expect(firstAnswer.elapsed >= .milliseconds(200) && secondAnswer.elapsed >= .milliseconds(2000))
                // The cancelled work leaves the queue: A stops within one check, B finishes without running.
                let drained = try await withWatchdog(.seconds(30), "the cancelled work to stop") {
                    try await queue.waitUntilAllOperationsAreFinished()
                    return true
                }
                #expect(drained)
                let snapshot = queue.snapshot()
                #expect(snapshot.finished == 2 && snapshot.cancelled == 2, "\(snapshot)")
                #expect(running.service.tally.counts.deadlineExpired == 2)
                // The thread is free again: a quick request is answered correctly.
                let after = try #require(await probe.get("/primes?limit=1000").answer)
                #expect(after.status == 200 && after.body == "168")
            }
        }
    }
}

/// Sends `paths` with at most `concurrency` requests in flight (each client sends its next request when its
/// previous one is answered) and returns every reply, in no particular order.
func drive(_ probe: HTTPProbe, _ paths: [String], concurrency: Int) async -> [Reply] {
    let next = Counter()
    return await withTaskGroup(of: [Reply].self) { group in
        for _ in 0..<concurrency {
            group.addTask {
                var replies: [Reply] = []
                while true {
                    let index = next.next()
                    guard index < paths.count else { return replies }
                    replies.append(await probe.get(paths[index]))
                }
            }
        }
        var all: [Reply] = []
        for await replies in group { all += replies }
        return all
    }
}

/// A shared counter handing out 0, 1, 2, …
final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    /// The next number. Any thread.
    func next() -> Int { self.value.add(1, ordering: .relaxed).oldValue }
}

/// Returns once `condition` holds, re-checking it between yields (for in-process state that has no event to
/// await); the caller's watchdog bounds the wait.
func waitUntil(_ what: String, _ condition: () -> Bool) async throws {
    while !condition() {
        try Task.checkCancellation()
        await Task.yield()
    }
}
