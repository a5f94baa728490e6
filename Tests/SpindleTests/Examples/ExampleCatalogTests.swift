import Glibc
import Spindle
import SpindleExamplesKit
import Testing

/// Every example in the catalogue runs to the end and writes something; each one has its own order test.
@Suite struct ExampleCatalogTests {
    /// The examples whose orders the other suites in this folder check; a new example must be added here and
    /// given a test.
    static let checked = [
        "invocation-start", "block-count", "counting-operation", "invocation-queue", "simple-operation",
        "vinny-operation", "my-operation", "width-2", "upload-runloop", "upload-semaphore", "task-with-data",
        "block-operation", "cancellation", "dependencies", "priorities", "completion-block", "add-operations",
        "waiting", "suspend-resume", "retry", "thread-object", "observed-values", "group-operation", "conditions",
        "port-async-operation", "port-sync-base-class", "port-is-ready", "port-queue-delegate", "port-dispatch",
    ]

    @Test func everyExampleHasAnOrderTestAndAUniqueName() {
        #expect(SpindleExamples.all.map(\.name) == Self.checked)
        #expect(Set(SpindleExamples.all.map(\.name)).count == SpindleExamples.all.count)
        #expect(SpindleExamples.named("no-such-example") == nil)
    }

    @Test(arguments: SpindleExamples.all.map(\.name))
    func exampleRunsToTheEnd(name: String) throws {
        let out = try runExample(name)
        #expect(!out.lines.isEmpty)
        #expect(!out.texts.contains { $0.contains("failed") || $0.contains("timed out") })
    }

    /// Four threads write 400 lines (about 20 KB, less than a pipe holds, so no reader is needed meanwhile).
    @Test func printingOutputKeepsLinesWhole() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let output = PrintingOutput(descriptor: fds[1])
        let threads = try (0..<4).map { t in
            try SpindleThread.spawnJoinable(name: "writer\(t)") {
                for i in 0..<100 { output.line("thread \(t) line \(i) " + String(repeating: "x", count: 40)) }
            }
        }
        for thread in threads { try thread.join() }
        close(fds[1])
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fds[0], &buffer, buffer.count)
            if n <= 0 { break }
            bytes += buffer[0..<n]
        }
        close(fds[0])
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 400)
        #expect(lines.allSatisfy { $0.hasPrefix("thread ") && $0.hasSuffix(String(repeating: "x", count: 40)) })
        for t in 0..<4 {
            let mine = lines.filter { $0.hasPrefix("thread \(t) line ") }
            #expect(mine.map { Int($0.split(separator: " ")[3])! } == Array(0..<100))
        }
    }
}
