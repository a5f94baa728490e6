import CShim
import Glibc
import Synchronization
import Testing

@testable import Spindle

// Helpers for the queue suites. Every name starts with `QT` (or `qt`) so this folder never collides with helpers
// of other test folders in the same test module. Nothing here sleeps as synchronisation: ops and tests meet on
// POSIX semaphores (an oracle independent of Spindle's own primitives) with generous deadlines; the only polling
// is `qtWaitUntil`, reserved for facts with no signal to wait on (weak references, /proc entries).

/// The generous failure-detector deadline every blocking step of these tests uses.
let qtDeadline: Double = 10

// MARK: - Queues on a pool

/// Whether this run puts queues made without a pool on one (`SPINDLE_QUEUES_ON_POOL`, see
/// `SpindleThreadPool.environmentDefault`): CI runs the queue suites once that way.
let qtQueuesOnPool = SpindleThreadPool.environmentDefault != nil

/// For tests of what only a queue with threads of its own does (its workers' names, their exit with the queue,
/// reservations): skipped when queues run on a pool.
let qtOwnThreadsOnly = Testing.ConditionTrait.disabled(if: qtQueuesOnPool, "tests a queue's own threads")

// MARK: - An oracle semaphore

/// A POSIX `sem_t`. `wait` gives up after `seconds` so a broken queue fails a test instead of hanging the run.
final class QTGate: @unchecked Sendable {
    private let sem = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)

    init(_ value: UInt32 = 0) { precondition(sem_init(self.sem, 0, value) == 0) }

    deinit {
        sem_destroy(self.sem)
        self.sem.deallocate()
    }

    /// Adds `count` permits.
    func open(_ count: Int = 1) {
        for _ in 0..<count { precondition(sem_post(self.sem) == 0) }
    }

    /// Takes a permit if one comes within `seconds`.
    @discardableResult
    func wait(seconds: Double = qtDeadline) -> Bool { oracleSemaphoreWait(self.sem, seconds: seconds) }

    /// Takes a permit only if one is there now.
    func tryWait() -> Bool { sem_trywait(self.sem) == 0 }
}

/// `parties` threads meet: each `arrive()` returns true once all have arrived (false after the deadline). Proves
/// that `parties` operations run at the same time: none can return true before the last one has started.
final class QTRendezvous: @unchecked Sendable {
    let parties: Int
    private let arrived = Atomic<Int>(0)
    private let gate = QTGate()

    init(parties: Int) { self.parties = parties }

    var arrivals: Int { self.arrived.load(ordering: .acquiring) }

    func arrive(seconds: Double = qtDeadline) -> Bool {
        if self.arrived.add(1, ordering: .acquiringAndReleasing).newValue == self.parties { self.gate.open(self.parties) }
        return self.gate.wait(seconds: seconds)
    }
}

// MARK: - Recording

/// A pthread mutex. Used instead of `Synchronization.Mutex` because ThreadSanitizer does not model the latter's
/// futex-based locking on Linux and reported false races between its critical sections under contention.
final class QTLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    init() { precondition(pthread_mutex_init(self.mutex, nil) == 0) }
    deinit {
        pthread_mutex_destroy(self.mutex)
        self.mutex.deallocate()
    }
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        precondition(pthread_mutex_lock(self.mutex) == 0)
        defer { precondition(pthread_mutex_unlock(self.mutex) == 0) }
        return try body()
    }
}

/// An append-only log, safe from any thread.
final class QTLog<Element: Sendable>: @unchecked Sendable {
    private let lock = QTLock()
    private var storage: [Element] = []  // protected by lock
    func append(_ element: Element) { self.lock.withLock { self.storage.append(element) } }
    var all: [Element] { self.lock.withLock { self.storage } }
    var count: Int { self.lock.withLock { self.storage.count } }
}

/// Counts how many are inside at once and remembers the most ever seen.
final class QTHighWater: Sendable {
    private let current = Atomic<Int>(0)
    private let highest = Atomic<Int>(0)
    func enter() {
        let now = self.current.add(1, ordering: .acquiringAndReleasing).newValue
        var seen = self.highest.load(ordering: .relaxed)
        while now > seen {
            let (done, actual) = self.highest.compareExchange(expected: seen, desired: now, ordering: .relaxed)
            if done { break }
            seen = actual
        }
    }
    func leave() { self.current.subtract(1, ordering: .acquiringAndReleasing) }
    var maximum: Int { self.highest.load(ordering: .acquiring) }
    /// How many are inside now.
    var inside: Int { self.current.load(ordering: .acquiring) }
}

/// A thread-safe counter.
final class QTCounter: Sendable {
    private let value = Atomic<Int>(0)
    @discardableResult
    func increment() -> Int { self.value.add(1, ordering: .acquiringAndReleasing).newValue }
    var count: Int { self.value.load(ordering: .acquiring) }
}

/// A thread-safe flag.
final class QTFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { self.value.store(true, ordering: .releasing) }
    var isSet: Bool { self.value.load(ordering: .acquiring) }
}

// MARK: - Threads and /proc

/// The calling thread's kernel id (gettid).
func qtTid() -> Int32 { cshim_gettid() }

/// Whether thread `tid` still exists in this process.
func qtTaskExists(_ tid: Int32) -> Bool { access("/proc/self/task/\(tid)", F_OK) == 0 }

/// The state letter of /proc/self/task/<tid>/stat ("R", "S", ...), nil if the thread is gone.
func qtThreadState(_ tid: Int32) -> Character? {
    let fd = open("/proc/self/task/\(tid)/stat", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 1024)
    let n = read(fd, &buffer, buffer.count)
    guard n > 0, let close = buffer[0..<n].lastIndex(of: UInt8(ascii: ")")), close + 2 < n else { return nil }
    return Character(Unicode.Scalar(buffer[close + 2]))
}

func qtMonotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Polls `condition` until it holds or `seconds` pass. Only for weak references and /proc facts (the shared
/// `waitUntil` of Support/TestSupport.swift).
func qtWaitUntil(seconds: Double = qtDeadline, _ condition: () -> Bool) -> Bool {
    waitUntil(deadline: seconds, condition)
}

// MARK: - Queues and errors

/// Drains `queue` (the rule: every queue a test uses is drained before the test returns).
func qtDrain(_ queue: SpindleOperationQueue, sourceLocation: SourceLocation = #_sourceLocation) {
    let drained = (try? queue.waitUntilAllOperationsAreFinished(timeout: .seconds(qtDeadline))) ?? false
    #expect(drained, "queue '\(queue.name)' did not drain", sourceLocation: sourceLocation)
}

/// The queue's worker threads (created or reserved), read under its lock.
func qtWorkerThreadCount(_ queue: SpindleOperationQueue) -> Int {
    queue.core.lock.withLock { queue.core.idle.threads.count }
}

/// Expects `body` to throw exactly `expected` (the shared `expectSpindleError`).
func qtExpectError(_ expected: SpindleError, sourceLocation: SourceLocation = #_sourceLocation,
                   _ body: () throws -> Void) {
    expectSpindleError(expected, sourceLocation: sourceLocation, body)
}

/// A block operation with a name (names make error payloads predictable).
func qtNamed(_ name: String, _ block: @escaping @Sendable () -> Void = {}) -> SpindleBlockOperation {
    let op = SpindleBlockOperation(block)
    op.name = name
    return op
}

/// Runs `body` on a fresh detached Spindle thread and waits (up to `seconds`) for it to return; false if it did
/// not (then the thread is left behind, still running `body`).
@discardableResult
func qtOnOtherThread(seconds: Double = qtDeadline, _ body: @escaping @Sendable () -> Void) -> Bool {
    let done = QTGate()
    do {
        try SpindleThread.detach(name: "qt-other") {
            body()
            done.open()
        }
    } catch {
        Issue.record("could not start a thread: \(error)")
        return false
    }
    return done.wait(seconds: seconds)
}

/// Keeps a computed value observable so the optimiser cannot drop the work that made it.
final class QTSink: Sendable {
    private let value = Atomic<UInt64>(0)
    func store(_ x: UInt64) { self.value.store(x, ordering: .relaxed) }
}

/// For exit-test children: ends the process with status 9 if it is still alive after the deadline, so a deadlock
/// in the code under test fails the test instead of hanging the run. (A semaphore nobody opens, not a sleep.)
func qtStartExitTestWatchdog(seconds: Double = qtDeadline) {
    _ = try? SpindleThread.detach(name: "qt-watchdog") {
        QTGate().wait(seconds: seconds)
        exit(9)
    }
}
