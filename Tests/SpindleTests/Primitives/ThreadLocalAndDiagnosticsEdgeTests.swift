import Glibc
import Testing

@testable import Spindle

/// Found by a review (each failed before its fix): thread-locals past the process's pthread keys trapped, and a
/// spawn failure with no retry was described as "retrying in 0 ms".
@Suite("Thread-locals past the key limit; a spawn failure's description", .timeLimit(.minutes(2)))
struct ThreadLocalAndDiagnosticsEdgeTests {
    /// pthread_key_create fails with EAGAIN past PTHREAD_KEYS_MAX (1024) live keys: a condition a caller can meet
    /// (one thread-local per object), which Syscalls.swift says must come back as an error, not a trap.
    @Test("making more thread-locals than the process has pthread keys does not crash the process")
    func threadLocalKeyExhaustion() async {
        await #expect(processExitsWith: .success) {
            var locals: [SpindleThreadLocal<Int>] = []
            for index in 0..<1_100 { locals.append(SpindleThreadLocal(initial: { index })) }
            withExtendedLifetime(locals) {}
        }
    }

    /// A pool reports `retryNanoseconds: 0` when it needs no retry (SpindleDiagnosticEvent's doc); the log line
    /// SpindleLogging writes (the description) still says a retry comes "in 0 ms".
    @Test("a spawn failure that schedules no retry is not described as 'retrying in 0 ms'")
    func spawnFailureWithoutRetryDescription() {
        let event = SpindleDiagnosticEvent.workerSpawnFailed(queue: "pool", errno: EAGAIN, retryNanoseconds: 0)
        #expect(!event.description.contains("retrying in 0 ms"), "\(event.description)")
    }
}
