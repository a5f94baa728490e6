import Glibc
import Testing

@testable import Spindle

// Helpers for the async suites (names start with `AT`/`at`). Blocking steps use POSIX semaphores (`QTGate`) with
// generous deadlines. The only polling is `atEventually`, which yields (never sleeps) until an internal fact with
// no signal to wait on holds (how many waiters are parked in a line), bounded by a deadline.

/// More waiters than the cooperative pool can have threads: Swift's global executor on Linux runs one queue per
/// priority whose width is the number of online CPUs, and `LIBDISPATCH_COOPERATIVE_POOL_STRICT=1` narrows it to 1
/// where libdispatch honours it. If a wait blocked its thread, these many waiters would exhaust the pool.
let atCrowd = 2 * max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))) + 4

/// The failure-detector deadline of these suites. Longer than the other folders' `qtDeadline`: under the full
/// `swift test`, every test of the run is queued on the same few cooperative threads and many of them block, so a
/// task these tests create can wait a long time for its first turn. Never reached when things work. Measured under
/// ThreadSanitizer (the whole suite, 66 s on 2 CPUs): many async tests of the run took 56–62 s, most of it waiting for
/// a turn, and one CI run's `aWaiterResumedOnTheLastWorkerDoesNotJoinItself` ran out the 120 s this was before; so it
/// is far above the whole suite's length.
let atDeadline: Double = 300

/// Yields until `condition` holds or `seconds` pass; returns whether it held.
func atEventually(seconds: Double = atDeadline, _ condition: () -> Bool) async -> Bool {
    let end = qtMonotonicSeconds() + seconds
    while !condition() {
        if qtMonotonicSeconds() > end { return condition() }
        await Task.yield()
    }
    return true
}

/// A deadline kept on a Spindle thread, never on a cooperative one: if the test has not called `disarm()` within
/// `seconds`, it records that it fired and calls `rescue` (which must unblock whatever the test awaits), so a
/// test whose waits blocked the cooperative pool fails by its deadline instead of hanging.
final class ATWatchdog: @unchecked Sendable {
    private let disarmed = QTGate()
    private let firedFlag = QTFlag()
    private var thread: SpindleThread?  // touched only by the test's own task

    init(seconds: Double = 20, rescue: @escaping @Sendable () -> Void) throws {
        let disarmed = self.disarmed, firedFlag = self.firedFlag
        self.thread = try SpindleThread.spawnJoinable(name: "at-watchdog") {
            if !disarmed.wait(seconds: seconds) {
                firedFlag.set()
                rescue()
            }
        }
    }

    /// Whether the deadline passed before `disarm()`.
    var fired: Bool { self.firedFlag.isSet }

    /// Stops the watchdog and joins its thread; returns whether it had fired.
    func disarm() -> Bool {
        self.disarmed.open()
        try? self.thread?.join()
        self.thread = nil
        return self.fired
    }
}

/// An error a body throws on purpose.
struct ATError: Error, Equatable { let code: Int }

/// Whether `error` is a `CancellationError`.
func atIsCancellation(_ error: (any Error)?) -> Bool { error is CancellationError }

/// The outcome of an awaited call, as a value the test can compare.
enum ATOutcome<Value: Sendable & Equatable>: Sendable, Equatable {
    case value(Value), cancelled, failed(String)

    init(_ body: () async throws -> Value) async {
        do { self = .value(try await body()) } catch is CancellationError { self = .cancelled } catch {
            self = .failed("\(error)")
        }
    }
}
