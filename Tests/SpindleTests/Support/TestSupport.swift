import Glibc
import Spindle
import Testing

// Helpers shared by the primitive and thread tests. Nothing here sleeps as synchronisation: the only polling is
// `waitUntil`, a condition re-checked until a deadline, for facts that come with no signal to wait on.

// MARK: - Clocks

/// CLOCK_MONOTONIC in seconds (an oracle independent of Spindle's own clock code).
func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// CLOCK_MONOTONIC in nanoseconds, read through Glibc (not through CShim).
func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

// MARK: - Polling /proc

/// Re-checks `condition` every 0.2 ms until it holds or `seconds` have passed; returns whether it held, and the
/// caller asserts that. The pause only spaces the checks: nothing is assumed to have happened after it. Only for
/// facts that come with no signal to wait on: entries of /proc (a thread gone, a thread's state), a weak reference
/// cleared, a thread arrived inside a primitive (a semaphore's waiter line, a blocked producer). Everything a test
/// can be told about, it waits for on a semaphore or condition with a deadline.
func waitUntil(deadline seconds: Double, _ condition: () -> Bool) -> Bool {
    let end = monotonicSeconds() + seconds
    var pause = timespec(tv_sec: 0, tv_nsec: 200_000)
    while !condition() {
        if monotonicSeconds() >= end { return condition() }
        nanosleep(&pause, nil)
    }
    return true
}

/// The bytes of a /proc file, or nil if it cannot be opened (for a task: it is gone).
func readProcBytes(_ path: String) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 512)
    while true {
        let n = read(fd, &buffer, buffer.count)
        if n < 0, errno == EINTR { continue }
        if n < 0 { return nil }
        if n == 0 { return bytes }
        bytes += buffer[0..<n]
    }
}

/// Number of threads in this process: the entries of /proc/self/task.
func threadCount() -> Int {
    guard let dir = opendir("/proc/self/task") else { return -1 }
    defer { closedir(dir) }
    var count = 0
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name != ".", name != ".." { count += 1 }
    }
    return count
}

/// The calling thread's kernel id, from the /proc/thread-self link ("<pid>/task/<tid>"), independent of CShim.
func kernelThreadID() -> Int32 {
    var buffer = [CChar](repeating: 0, count: 64)
    let length = readlink("/proc/thread-self", &buffer, buffer.count - 1)
    guard length > 0 else { return -1 }
    let text = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return text.split(separator: "/").last.flatMap { Int32($0) } ?? -1
}

/// Whether the kernel still has thread `tid` in this process.
func taskExists(tid: Int32) -> Bool { access("/proc/self/task/\(tid)", F_OK) == 0 }

/// The raw bytes of /proc/self/task/<tid>/comm without the trailing newline.
func readCommBytes(tid: Int32) -> [UInt8]? {
    guard var bytes = readProcBytes("/proc/self/task/\(tid)/comm") else { return nil }
    if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
    return bytes
}

/// /proc/self/task/<tid>/comm as a string; nil if the task is gone or the bytes are not valid UTF-8.
func readComm(tid: Int32) -> String? {
    guard let bytes = readCommBytes(tid: tid) else { return nil }
    return String(validating: bytes, as: UTF8.self)
}

// MARK: - An oracle semaphore

/// A POSIX `sem_t`, used to synchronise tests with something other than the code under test.
final class OracleSemaphore: @unchecked Sendable {
    private let sem = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)

    init(_ value: UInt32 = 0) { precondition(sem_init(self.sem, 0, value) == 0) }

    deinit {
        sem_destroy(self.sem)
        self.sem.deallocate()
    }

    func post() { precondition(sem_post(self.sem) == 0) }

    /// Takes a permit if one comes within `seconds` (a generous failure detector, never a timing assertion).
    func wait(seconds: Double = 10) -> Bool { oracleSemaphoreWait(self.sem, seconds: seconds) }
}

/// glibc's `sem_clockwait` (2.30+), which the Glibc module does not declare (it is a GNU extension), looked up once.
private let semClockWait = unsafeBitCast(
    dlsym(UnsafeMutableRawPointer(bitPattern: 0) /* RTLD_DEFAULT */, "sem_clockwait")!,
    to: (@convention(c) (UnsafeMutablePointer<sem_t>?, clockid_t, UnsafePointer<timespec>?) -> Int32).self)

/// Takes a permit of `sem` if one comes within `seconds`, measured on CLOCK_MONOTONIC (`sem_clockwait`): a step of
/// the wall clock (a virtual machine resumed, the time set) neither ends the wait early nor stretches it, as it
/// would for `sem_timedwait`, whose deadline is on CLOCK_REALTIME.
func oracleSemaphoreWait(_ sem: UnsafeMutablePointer<sem_t>, seconds: Double) -> Bool {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    let whole = Int(seconds)
    var nanos = now.tv_nsec + Int((seconds - Double(whole)) * 1e9)
    var secs = now.tv_sec + whole
    if nanos >= 1_000_000_000 { nanos -= 1_000_000_000; secs += 1 }
    var deadline = timespec(tv_sec: secs, tv_nsec: nanos)
    while true {
        if semClockWait(sem, CLOCK_MONOTONIC, &deadline) == 0 { return true }
        if errno != EINTR { return false }
    }
}

/// Posts `semaphore` when released: proves that whoever held the last reference let it go.
final class ReleaseSentinel: Sendable {
    let semaphore: OracleSemaphore
    init(_ semaphore: OracleSemaphore) { self.semaphore = semaphore }
    deinit { self.semaphore.post() }
}

/// Shared mutable state that the test guards with the primitive under test (deliberately unsynchronised itself).
final class UnguardedBox<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}

// MARK: - Errors

/// Expects `body` to throw exactly `expected` (compared by description: every case prints its payload).
func expectSpindleError(_ expected: SpindleError, sourceLocation: SourceLocation = #_sourceLocation,
                        _ body: () throws -> Void) {
    do {
        try body()
        Issue.record("expected \(expected), but nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as SpindleError {
        #expect(error.description == expected.description, sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(expected), but \(error) was thrown", sourceLocation: sourceLocation)
    }
}

/// Runs `count` joinable threads doing `body(index)`, then `beforeJoining` on the calling thread, then joins them.
func runJoinableThreads(_ count: Int, name: String = "spindle-test", _ body: @escaping @Sendable (Int) -> Void,
                        beforeJoining: () -> Void = {}) throws {
    let threads = try (0..<count).map { index in try SpindleThread.spawnJoinable(name: name) { body(index) } }
    beforeJoining()
    for thread in threads { try thread.join() }
}
