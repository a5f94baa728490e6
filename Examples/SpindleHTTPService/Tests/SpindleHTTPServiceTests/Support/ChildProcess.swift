import Glibc

/// The service's own executable run as a child process (`posix_spawn`), its standard output on a pipe (the test
/// reads the "listening on" line from it) and its standard error in a file (read after it exited).
///
/// `readLine` and `waitForExit` block: call them off the cooperative pool (the tests run them on a Spindle queue
/// with `queue.run`). Killing the child (`signal(SIGKILL)`) ends both.
final class ChildProcess: Sendable {
    let pid: pid_t
    let stderrPath: String
    private let stdoutDescriptor: Int32  // read by one thread at a time (the caller of readLine)

    /// The `spindle-http-service` built beside this test bundle.
    static var serviceExecutable: String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        precondition(count > 0, "readlink /proc/self/exe failed (errno \(errno))")
        let bundle = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let directory = bundle.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        return directory + "/spindle-http-service"
    }

    /// Starts `path` with `arguments`.
    /// - Throws: `TestFailure` naming the call that failed.
    init(_ path: String, _ arguments: [String], stderrPath: String) throws {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw TestFailure("pipe failed (errno \(errno))") }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }  // the child gets only the dup2 onto its stdout
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO)
        posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = [strdup("PATH=/usr/bin:/bin"), nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, &actions, nil, argv, envp)
        close(fds[1])
        guard rc == 0 else {
            close(fds[0])
            throw TestFailure("posix_spawn \(path) failed (\(rc))")
        }
        self.pid = pid
        self.stdoutDescriptor = fds[0]
        self.stderrPath = stderrPath
    }

    deinit {
        close(self.stdoutDescriptor)
    }

    /// The next line of the child's standard output, without its newline; nil at end of file. Blocks.
    func readLine() -> String? {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let got = read(self.stdoutDescriptor, &byte, 1)
            if got < 0 && errno == EINTR { continue }
            if got <= 0 { return line.isEmpty ? nil : String(decoding: line, as: UTF8.self) }
            if byte == UInt8(ascii: "\n") { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
    }

    /// Sends `signal` to the child.
    func signal(_ signal: Int32) {
        kill(self.pid, signal)
    }

    /// Waits for the child to end; returns its exit status, or nil if a signal ended it. Blocks.
    func waitForExit() -> Int32? {
        var status: Int32 = 0
        while waitpid(self.pid, &status, 0) < 0 {
            precondition(errno == EINTR, "waitpid failed (errno \(errno))")
        }
        let terminatingSignal = status & 0x7f
        return terminatingSignal == 0 ? (status >> 8) & 0xff : nil
    }

    /// What the child wrote to standard error so far.
    var standardError: String {
        guard let file = fopen(self.stderrPath, "r") else { return "" }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let got = fread(&chunk, 1, chunk.count, file)
            if got == 0 { break }
            bytes += chunk[0..<got]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
