import Glibc
import Testing
@testable import Spindle

private let childVariable = "SPINDLE_OPS_CHAIN_RELEASE_CHILD"

/// Runs this test binary again with only `filter` selected and `childVariable` set; returns the wait status, or
/// nil if the child did not end within `seconds` (it is then killed).
private func runChild(filter: String, seconds: Int) throws -> Int32? {
    let path = "/proc/self/exe"
    let arguments = [path, "--testing-library", "swift-testing", "--filter", filter]
    var environment = ProcessInfoLite.environment.filter { !$0.hasPrefix(childVariable + "=") }
    environment.append("\(childVariable)=1")
    let argv = arguments.map { strdup($0) } + [nil]
    let envp = environment.map { strdup($0) } + [nil]
    defer {
        argv.forEach { free($0) }
        envp.forEach { free($0) }
    }
    // The child's report would interleave with ours: send its output to /dev/null (its exit status is the verdict).
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, path, &actions, nil, argv, envp)
    guard spawned == 0 else { throw SpindleError.system(function: "posix_spawn", errno: spawned) }
    let child = pid
    let status = OpBox<Int32?>(nil)
    let reaper = try OpThread.run("op-reaper") {
        var raw: Int32 = 0
        while waitpid(child, &raw, 0) < 0 && errno == EINTR {}
        status.value = raw
    }
    if reaper.done.wait(timeout: .seconds(Int64(seconds))) {
        try? reaper.thread.join()
        return status.value
    }
    kill(child, SIGKILL)  // only the child this test started
    _ = reaper.finish()
    return nil
}

/// The environment as "NAME=value" strings (no Foundation in this package).
private enum ProcessInfoLite {
    static var environment: [String] {
        var result: [String] = []
        var cursor = environ
        while let entry = cursor.pointee {
            result.append(String(cString: entry))
            cursor += 1
        }
        return result
    }
}

/// Releasing a long dependency chain. Finished dependencies stay listed (E35), so a chain of N operations is a
/// chain of N strong references; dropping its last link must not recurse N deep and overflow the stack. The work
/// runs in a child process so a crash fails this test instead of killing the whole test run.
@Suite struct OperationChainReleaseTests {
    /// The child's work (enabled only inside the child): build a 100,000-long chain, run it, drop it.
    @Test(.enabled(if: getenv(childVariable) != nil, "runs only as the child of releasingALongChainDoesNotCrash"))
    func chainReleaseChild() throws {
        var ops: [SpindleOperation] = []
        ops.reserveCapacity(100_000)
        for _ in 0..<100_000 {
            let op = SpindleOperation()
            if let previous = ops.last { try op.addDependency(previous) }
            ops.append(op)
        }
        for op in ops { try op.start() }
        ops = []
        #expect(ops.isEmpty)
    }

    @Test(.enabled(if: getenv(childVariable) == nil))
    func releasingALongChainDoesNotCrash() throws {
        let status = try runChild(filter: "chainReleaseChild", seconds: 120)
        let raw = try #require(status, "the child did not finish within 120 s")
        let signalled = raw & 0x7f
        #expect(signalled == 0, "the child died of signal \(signalled) (11 = SIGSEGV: recursive release overflowed the stack)")
        #expect(signalled != 0 || (raw >> 8) & 0xff == 0, "the child exited with status \((raw >> 8) & 0xff)")
    }
}
