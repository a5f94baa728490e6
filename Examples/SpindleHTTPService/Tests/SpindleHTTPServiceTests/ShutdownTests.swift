import Spindle
import SpindleHTTPServiceKit
import Synchronization
import Testing

extension EndToEndTests {
    /// A graceful shutdown in the middle of a load: the server stops accepting, answers everything it accepted, the
    /// queue drains and terminates, and only then does the service group return. In process, the shutdown is asked
    /// for with `triggerGracefulShutdown()`, the call SIGTERM leads to (`SignalTests` sends the real signal).
    @Suite struct ShutdownTests {
        static let mebibyte = 1 << 20

        /// Twelve clients send requests back to back: two thirds hash 4 MiB twice (a correct 200 if accepted), one
        /// third ask for hours of work with a 250 ms deadline (a 504 if accepted). Once a dozen answers came back, the
        /// next 503 (the queue full at that moment) makes the test ask for the shutdown; the clients keep sending
        /// until the server no longer accepts connections. Every request the service accepted (every one but the
        /// refused) must have reached its client, as its 200 or its 504.
        @Test(.timeLimit(.minutes(2)))
        func shutdownUnderLoadLosesNoAcceptedRequest() async throws {
            let (width, capacity, clients) = (2, 6, 12)
            try await withRunningService(
                "shutdown",
                connections: clients,
                configure: {
                    $0.width = width
                    $0.capacity = capacity
                    $0.deadline = .seconds(60)
                }
            ) { running, probe in
                let queue = running.service.executor.queue
                let bytes = 4 * Self.mebibyte
                let expected = Oracle.hash(path: running.service.dataFile.path, bytes: bytes, rounds: 2)
                let normal = "/hash?bytes=\(bytes)&rounds=2"
                let short = "/primes?limit=1000000000&deadline_ms=250"
                let trigger = ShutdownTrigger(after: 12)

                let replies = try await withWatchdog(.seconds(90), "the load and the shutdown") {
                    await withTaskGroup(of: [Reply].self) { group in
                        for client in 0..<clients {
                            group.addTask {
                                var replies: [Reply] = []
                                var sent = 0
                                // Refused clients retry at once (they ignore Retry-After), a few hundred times
                                // each before the shutdown; the bound only keeps a broken service from looping
                                // them forever.
                                while sent < 5_000 {
                                    let reply = await probe.get(client % 3 == 0 ? short : normal)
                                    sent += 1
                                    replies.append(reply)
                                    guard let answer = reply.answer else { break }  // the server stopped accepting
                                    await trigger.saw(answer, running, queue)
                                }
                                return replies
                            }
                        }
                        var all: [Reply] = []
                        for await replies in group { all += replies }
                        return all
                    }
                }
                try await withWatchdog(.seconds(60), "the service group to return") {
                    try await running.waitUntilStopped()
                }

                let fired = try #require(trigger.firing, "the load never filled the queue after a dozen answers")
                #expect(fired.inFlight > 0, "nothing was in the queue when the shutdown began")
                #expect(queue.isShutDown && queue.isTerminated)
                let answers = replies.compactMap(\.answer)
                var ok = 0, late = 0
                for answer in answers {
                    switch answer.status {
                    case 200:
                        ok += 1
                        #expect(answer.path == normal && answer.body == expected, "\(answer.path): wrong answer")
                    case 504:
                        late += 1
                        #expect(answer.path == short, "a 504 for a request with a 60 s deadline")
                        #expect(answer.elapsed >= .milliseconds(250))
                    case 503:
                        #expect(answer.retryAfter == "1")
                    default:
                        Issue.record("\(answer.path): unexpected \(answer.status) \(answer.body)")
                    }
                }
                // Every accepted request got its answer: the service's count of accepted requests is the clients'
                // count of 200s and 504s, category by category.
                let counts = running.service.tally.counts
                #expect(counts.completed == ok, "\(counts); clients saw \(ok) 200s")
                #expect(counts.deadlineExpired == late, "\(counts); clients saw \(late) 504s")
                #expect(counts.failed == 0 && counts.abandoned == 0, "\(counts)")
                #expect(
                    answers.contains { $0.answered > fired.at && ($0.status == 200 || $0.status == 504) },
                    "nothing accepted before the shutdown was answered after it"
                )
                #expect(
                    replies.contains { $0.answer == nil },
                    "the server still accepted connections after it returned"
                )
                let snapshot = queue.snapshot()
                #expect(snapshot.operationCount == 0 && snapshot.highWaterOperationCount <= capacity, "\(snapshot)")
            }
        }

        /// After a shutdown with nothing in flight, the queue refuses work and the group returns promptly.
        @Test(.timeLimit(.minutes(1)))
        func idleShutdownTerminatesTheQueue() async throws {
            let running = try await withRunningService("idle", connections: 1, configure: { $0.width = 2 }) {
                running,
                probe in
                let answer = try #require(await probe.get("/primes?limit=100").answer)
                #expect(answer.status == 200 && answer.body == "25")
                return running
            }
            let queue = running.service.executor.queue
            #expect(queue.isTerminated)
            let refused = await running.service.executor.execute(timeout: .seconds(1)) { _ in 1 }
            guard case .refused(.shutDown) = refused else {
                Issue.record("work after the shutdown: \(refused)")
                return
            }
        }
    }
}

/// Asks for the shutdown once: at the first 503 after `threshold` answers (200 or 504) were seen, so that the
/// queue is full when it begins. Remembers when, and how full the queue was.
final class ShutdownTrigger: Sendable {
    struct Firing: Sendable {
        /// When the shutdown was asked for.
        let at: ContinuousClock.Instant
        /// Operations in the queue (running or waiting) just before.
        let inFlight: Int
    }

    private struct State {
        var answered = 0
        var firing: Firing? = nil
    }

    private let threshold: Int
    private let state = Mutex(State())

    init(after threshold: Int) { self.threshold = threshold }

    /// The firing, once it happened.
    var firing: Firing? { self.state.withLock { $0.firing } }

    /// Counts `answer`; if it is the 503 that crosses the threshold, asks `running` to shut down.
    func saw(_ answer: Answer, _ running: RunningService, _ queue: SpindleOperationQueue) async {
        let fire = self.state.withLock { state -> Bool in
            if answer.status == 200 || answer.status == 504 { state.answered += 1 }
            guard answer.status == 503, state.answered >= self.threshold, state.firing == nil else { return false }
            state.firing = Firing(at: .now, inFlight: queue.snapshot().operationCount)
            return true
        }
        if fire { await running.triggerShutdown() }
    }
}
