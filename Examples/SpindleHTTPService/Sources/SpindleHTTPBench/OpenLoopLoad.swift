import AsyncHTTPClient
import NIOCore
import NIOPosix

/// One request's fate under an open-loop load.
struct Sample: Sendable {
    /// The status, or nil when no answer came (a connection error, a client time-out).
    let status: Int?
    /// From when the request was due to be sent (its place in the schedule, not when it was sent: a late send
    /// counts against the latency) to its whole answer.
    let latency: Duration
}

/// Sends GET requests for `path` at a fixed rate for a fixed time, whatever the answers (open loop: a slow server
/// does not slow the sender down), each on its own task, and collects every answer.
struct OpenLoopLoad {
    let client: HTTPClient
    let url: String
    let rate: Double
    let duration: Duration

    /// Runs the load; returns the samples and the time from the first request due to the last answer.
    func run() async -> (samples: [Sample], elapsed: Duration) {
        let clock = ContinuousClock()
        let total = Int((self.rate * self.seconds(self.duration)).rounded())
        let start = clock.now
        let samples = await withTaskGroup(of: Sample.self) { group in
            var sent = 0
            while sent < total {
                // Send every request due by now, then sleep until the next one is due.
                let due = min(total, Int(self.seconds(clock.now - start) * self.rate) + 1)
                while sent < due {
                    let scheduled = start + .seconds(Double(sent) / self.rate)
                    group.addTask { await self.send(scheduled: scheduled, clock: clock) }
                    sent += 1
                }
                if sent < total {
                    try? await Task.sleep(until: start + .seconds(Double(sent) / self.rate), clock: clock)
                }
            }
            var samples: [Sample] = []
            samples.reserveCapacity(total)
            for await sample in group { samples.append(sample) }
            return samples
        }
        return (samples, clock.now - start)
    }

    private func send(scheduled: ContinuousClock.Instant, clock: ContinuousClock) async -> Sample {
        do {
            let response = try await self.client.execute(HTTPClientRequest(url: self.url), timeout: .seconds(60))
            _ = try await response.body.collect(upTo: 1 << 16)
            return Sample(status: Int(response.status.code), latency: clock.now - scheduled)
        } catch {
            return Sample(status: nil, latency: clock.now - scheduled)
        }
    }

    private func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
