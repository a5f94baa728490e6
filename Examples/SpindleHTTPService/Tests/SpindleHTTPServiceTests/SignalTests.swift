import Glibc
import Spindle
import Testing

extension EndToEndTests {
    /// The shipped executable under a real SIGTERM: started with `--port 0`, loaded until its queue is full, then sent
    /// SIGTERM. It must answer every request it accepted, drain its queue and exit 0.
    @Suite struct SignalTests {
        /// Blocking calls on the child (reading its output, waiting for it) run here, off the cooperative pool.
        static let blocking = try! SpindleOperationQueue(name: "child-process", maxConcurrentOperationCount: 2)

        @Test(.timeLimit(.minutes(2)))
        func sigtermDrainsInFlightRequestsThenExits() async throws {
            let (capacity, requests) = (4, 5)  // width 1, so 4 accepted and waiting at once, the fifth refused
            let dataPath = "/tmp/spindle-http-service-sigterm-\(getpid()).data"
            let stderrPath = "/tmp/spindle-http-service-sigterm-\(getpid()).log"
            defer { unlink(dataPath); unlink(stderrPath) }
            let child = try ChildProcess(
                ChildProcess.serviceExecutable,
                [
                    "--port", "0", "--width", "1", "--capacity", String(capacity), "--deadline-ms", "60000",
                    "--data-file", dataPath, "--data-file-bytes", String(16 << 20),
                ],
                stderrPath: stderrPath
            )
            let outcome = try await self.watching(child) {
                let line = try await Self.blocking.run { child.readLine() } ?? ""
                guard line.hasPrefix("listening on http://127.0.0.1:"),
                    let port = Int(line.split(separator: ":").last ?? "")
                else { throw TestFailure("no listening line; got \"\(line)\"") }
                let slow = "/hash?bytes=\(16 << 20)&rounds=2"
                let probe = HTTPProbe(port: port, connections: requests)
                var replies: [Reply] = []
                var sigtermAt: ContinuousClock.Instant? = nil
                await withTaskGroup(of: Reply.self) { group in
                    for _ in 0..<requests { group.addTask { await probe.get(slow) } }
                    for await reply in group {
                        replies.append(reply)
                        if sigtermAt == nil, reply.answer?.status == 503 {  // the queue is full right now
                            sigtermAt = .now
                            child.signal(SIGTERM)
                        }
                    }
                }
                try await probe.shutdown()
                if sigtermAt == nil { child.signal(SIGTERM) }  // (fails below) still end the child
                let status = try await Self.blocking.run { child.waitForExit() }
                return (replies, sigtermAt, status)
            }
            let (replies, sigtermAt, status) = outcome
            let log = child.standardError
            let sentAt = try #require(
                sigtermAt,
                "no request was refused, so SIGTERM was not sent under load: \(replies)"
            )
            #expect(status == 0, "exit status \(String(describing: status)); log:\n\(log)")
            let expected = Oracle.hash(path: dataPath, bytes: 16 << 20, rounds: 2)
            let answers = try replies.map { try #require($0.answer, "no answer: \($0); log:\n\(log)") }
            let ok = answers.filter { $0.status == 200 }
            #expect(ok.count == capacity && answers.count - ok.count == 1, "statuses \(answers.map(\.status))")
            for answer in ok { #expect(answer.body == expected) }
            #expect(ok.contains { $0.answered > sentAt }, "nothing in flight was answered after SIGTERM")
            #expect(log.contains("accepted \(capacity) (200: \(capacity), 504: 0"), "log:\n\(log)")
            #expect(log.contains("terminated=true"), "log:\n\(log)")
        }

        /// Runs `body`; if it has not returned within a minute, kills the child (which ends any read of its output or
        /// wait for it) and fails.
        private func watching<T: Sendable>(
            _ child: ChildProcess,
            _ body: @escaping @Sendable () async throws -> T
        ) async throws -> T {
            try await withThrowingTaskGroup(of: T?.self) { group in
                group.addTask { try await body() }
                group.addTask {
                    try await Task.sleep(for: .seconds(60))  // a watchdog only
                    child.signal(SIGKILL)
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let value = first else {
                    throw TestFailure("the child did not finish within a minute; killed. Log:\n\(child.standardError)")
                }
                return value
            }
        }
    }
}
