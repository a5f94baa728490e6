#if SpindleServiceLifecycle  // the trait of the same name (Package.swift)
import Spindle

// Helpers for the SpindleServiceLifecycle tests. Nothing here sleeps to learn that something happened: hand-offs
// go through semaphores awaited under a generous bound; `eventually` re-checks a fact that comes with no signal
// (a queue has been shut down, a thread has exited) until a deadline, yielding between checks.

/// How long a test waits for something that should happen at once before it fails instead of hanging.
/// Generous: these suites share one test process with 600 others on a cooperative pool of one thread per core (2
/// here), and under ThreadSanitizer synchronous tests have held that pool for over 20 s (a 1 ms sampling loop then
/// got no thread until the old 20 s bound ran out). Only a failing test waits this long.
let patience: Duration = .seconds(120)

/// Runs `work`, giving up after `patience`: nil if it did not return in time (it is then cancelled, and the
/// awaits it uses are cancellable). The sleep is only the bound raced against `work`, which wins at once when the
/// code under test is right.
func withinPatience<T: Sendable>(_ work: @escaping @Sendable () async -> T) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await work() }
        group.addTask {
            try? await Task.sleep(for: patience)
            return nil
        }
        let first = await group.next()!
        group.cancelAll()
        return first
    }
}

/// Re-checks `condition` until it holds or `patience` has passed; returns whether it held.
func eventually(_ condition: @Sendable () -> Bool) async -> Bool {
    let deadline = SpindleDeadline.after(patience)
    while !condition() {
        if deadline.hasPassed { return false }
        await Task.yield()
    }
    return true
}

/// How a service's `run()` ended.
enum RunEnd: Equatable, Sendable {
    case returned
    case cancelled
    case threw(String)

    /// Runs `body` and says how it ended.
    static func of(_ body: () async throws -> Void) async -> RunEnd {
        do {
            try await body()
            return .returned
        } catch is CancellationError {
            return .cancelled
        } catch {
            return .threw("\(error)")
        }
    }
}

/// An operation that holds its slot until `gate` is signalled, or until it is cancelled (its `cancel` signals the
/// gate), signalling `started` first.
final class GatedOperation: SpindleOperation, @unchecked Sendable {
    let started = try! SpindleSemaphore(value: 0)  // 0 is a valid value
    let gate = try! SpindleSemaphore(value: 0)  // 0 is a valid value

    override func main() throws {
        self.started.signal()
        _ = self.gate.wait(timeout: patience * 2)  // a bound, so a failing test cannot leave it parked forever
    }

    override func cancel() {
        super.cancel()
        self.gate.signal()
    }
}
#endif
