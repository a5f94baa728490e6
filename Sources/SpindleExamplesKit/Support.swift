import Glibc
import Spindle

/// An example found something it did not expect (a wait that timed out): the example stops and says what.
public struct ExampleFailure: Error, CustomStringConvertible {
    /// What went wrong.
    public let description: String

    /// A failure saying `description`.
    public init(_ description: String) { self.description = description }
}

/// Stands in for work the books simulate with `sleep`: blocks the calling thread for `milliseconds`. The books
/// sleep for seconds; the examples sleep for a few milliseconds so that a whole run takes a few seconds.
func simulateWork(milliseconds: Int) {
    var pause = timespec(tv_sec: milliseconds / 1000, tv_nsec: (milliseconds % 1000) * 1_000_000)
    var remaining = timespec()
    while nanosleep(&pause, &remaining) != 0 && errno == EINTR { pause = remaining }
}

/// Waits on `semaphore` for at most ten seconds, throwing if it was not signalled by then (a broken example must
/// fail, not hang).
func expectSignal(_ semaphore: SpindleSemaphore, _ what: String) throws {
    guard semaphore.wait(timeout: .seconds(10)) else { throw ExampleFailure("timed out waiting for \(what)") }
}

/// A meeting point for `parties` threads: each arrives and waits until all have arrived (or the timeout passes).
/// `arrived` is guarded by `condition`'s mutex.
final class Rendezvous: @unchecked Sendable {
    private let parties: Int
    private var arrived = 0
    private let condition = SpindleCondition()

    init(parties: Int) { self.parties = parties }

    /// Arrives, then waits for the others; returns whether all arrived within `timeout`.
    func arriveAndWait(timeout: Duration) -> Bool {
        let deadline = SpindleDeadline.after(timeout)
        return self.condition.withLock {
            self.arrived += 1
            self.condition.broadcast()
            return self.condition.wait(until: deadline) { self.arrived < self.parties }
        }
    }
}
