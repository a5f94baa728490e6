import Spindle
import SpindleExamplesKit
import Testing

// Helpers for the example tests: run an example through a capturing sink, then find lines in what it wrote.

/// Runs the example called `name` on the calling thread and returns everything it wrote.
func runExample(_ name: String) throws -> CapturingOutput {
    let example = try #require(SpindleExamples.named(name), "no example named \(name)")
    let output = CapturingOutput()
    try example.run(output)
    return output
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
