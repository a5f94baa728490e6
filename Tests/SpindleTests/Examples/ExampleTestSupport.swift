import Spindle
import SpindleExamplesKit
import Testing

// Helpers for the example tests: run an example through a capturing sink, then find lines in what it wrote.

/// How long one example may take before its test fails. The examples wait the way the code they show does, with
/// plain `waitUntilFinished()` and no deadline, so a broken library would hang them; the test waits for the whole
/// example with this generous deadline instead (three times `qtDeadline`: an example is several blocking steps).
let exampleDeadline: Double = 3 * qtDeadline

/// Runs the example called `name` on a fresh Spindle thread and returns everything it wrote, and that thread (the
/// example's calling thread, which stands in for the books' main thread). An example that does not end within
/// `exampleDeadline` fails the test (its thread is left behind) instead of hanging the run.
func runExampleOnCaller(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws
    -> (out: CapturingOutput, caller: SpindleThread) {
    let example = try #require(SpindleExamples.named(name), "no example named \(name)")
    let output = CapturingOutput()
    let caller = QTLog<SpindleThread>()
    let errors = QTLog<any Error>()
    let ended = qtOnOtherThread(seconds: exampleDeadline) {
        caller.append(SpindleThread.current)
        do { try example.run(output) } catch { errors.append(error) }
    }
    try #require(ended, "example \(name) did not end within \(exampleDeadline) s", sourceLocation: sourceLocation)
    if let error = errors.all.first { throw error }
    return (output, try #require(caller.all.first, sourceLocation: sourceLocation))
}

/// `runExampleOnCaller` for tests that do not look at the calling thread: just what the example wrote.
func runExample(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> CapturingOutput {
    try runExampleOnCaller(name, sourceLocation: sourceLocation).out
}

extension CapturingOutput {
    /// The index of the first line equal to `text`, or nil.
    func index(of text: String) -> Int? { self.lines.firstIndex { $0.text == text } }

    /// The index of the first line starting with `prefix`, or nil.
    func index(prefix: String) -> Int? { self.lines.firstIndex { $0.text.hasPrefix(prefix) } }

    /// The indices of every line starting with `prefix`.
    func indices(prefix: String) -> [Int] { self.lines.indices.filter { self.lines[$0].text.hasPrefix(prefix) } }

    /// The first `count` lines after `start` written by the thread that wrote line `start`.
    func following(_ start: Int, count: Int) -> [CapturingOutput.Line] {
        let tid = self.lines[start].threadID
        return Array(self.lines[(start + 1)...].filter { $0.threadID == tid }.prefix(count))
    }

    /// Whether line `a` exists and comes before line `b`, which exists too.
    func isOrdered(_ a: Int?, _ b: Int?) -> Bool {
        guard let a, let b else { return false }
        return a < b
    }
}

/// "tid N" as `SpindleThread.description` shows it.
func tidTag(_ tid: Int32) -> String { "tid \(tid))" }
