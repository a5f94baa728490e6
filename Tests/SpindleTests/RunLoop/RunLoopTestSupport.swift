import CShim
import Glibc
import Spindle

// Helpers for the run-loop tests. Nothing sleeps as synchronisation: threads hand results over through
// semaphores and joins; the only polling is `RunLoopTestSupport.poll`, for /proc facts (descriptor counts).

enum RunLoopTestSupport {
    /// Generous deadline for anything that should happen "promptly".
    static let patience = 10.0

    /// A deadline `seconds` from now.
    static func after(_ seconds: Double) -> SpindleDeadline {
        SpindleDeadline(uptimeNanoseconds: cshim_clock_monotonic_ns() + UInt64(seconds * 1e9))
    }

    /// Seconds since `start` (CLOCK_MONOTONIC ns).
    static func seconds(since start: UInt64) -> Double {
        Double(cshim_clock_monotonic_ns() - start) / 1e9
    }

    /// Runs `body` on a new joinable thread and joins it; the error `body` throws, if any, is rethrown here.
    static func onNewThread(_ name: String = "rl-test", _ body: @escaping @Sendable () throws -> Void) throws {
        let failure = RLBox<String?>(nil)
        let thread = try SpindleThread.spawnJoinable(name: name) {
            do { try body() } catch { failure.withLock { $0 = "\(error)" } }
        }
        try thread.join()
        if let message = failure.withLock({ $0 }) { throw TestFailure(message: message) }
    }

    /// Spawns a joinable thread (the caller joins it).
    static func spawn(_ name: String = "rl-helper", _ body: @escaping @Sendable () -> Void) throws -> SpindleThread {
        try SpindleThread.spawnJoinable(name: name, body)
    }

    /// Entries of /proc/self/fd (open descriptors of the process).
    static func descriptorCount() -> Int {
        guard let dir = opendir("/proc/self/fd") else { return -1 }
        defer { closedir(dir) }
        var count = 0
        while readdir(dir) != nil { count += 1 }
        return count - 3  // ".", ".." and the directory's own descriptor
    }

    /// Polls a /proc fact until it holds or `seconds` pass (the only polling the tests allow): the shared
    /// `waitUntil` of Support/TestSupport.swift.
    static func poll(seconds: Double, _ condition: () -> Bool) -> Bool {
        waitUntil(deadline: seconds, condition)
    }

    /// Burns CPU on the calling thread for `seconds` (simulates a slow callback; not a wait).
    static func burn(seconds: Double) {
        let end = cshim_clock_monotonic_ns() + UInt64(seconds * 1e9)
        while cshim_clock_monotonic_ns() < end {}
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let message: String
    var description: String { self.message }
}

/// A counter for handler calls, with the thread each call ran on.
final class CallRecorder: @unchecked Sendable {
    private let calls = RLBox<[Int32]>([])

    /// Records a call from the current thread.
    func record() { self.calls.withLock { $0.append(cshim_gettid()) } }
    var count: Int { self.calls.withLock { $0.count } }
    var threads: [Int32] { self.calls.withLock { $0 } }
}

/// A value under a pthread mutex (`SpindleMutex`), for handing results between test threads. Not
/// `Synchronization.Mutex`: ThreadSanitizer does not see that lock on Linux and would report false races.
final class RLBox<Value>: @unchecked Sendable {
    private let mutex = SpindleMutex()
    private var value: Value  // protected by `mutex`

    init(_ value: Value) { self.value = value }

    func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        self.mutex.lock()
        defer { self.mutex.unlock() }
        return try body(&self.value)
    }
}
