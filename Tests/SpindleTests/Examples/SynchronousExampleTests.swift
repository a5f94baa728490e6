import Spindle
import SpindleExamplesKit
import Testing

/// Seed 000 §7.11 and seed 003 §1: operations started by hand run on the calling thread and `start()` returns when
/// the work is done. The calling thread stands in for the books' main thread.
@Suite struct SynchronousExampleTests {
    @Test func invocationOperationRunsOnTheCallingThread() throws {
        let out = try runExample("invocation-start")
        #expect(out.texts == [
            "Parameter Object = 123",
            "Main Thread = \(SpindleThread.main)",
            "Current Thread = \(SpindleThread.current)",
        ])
        #expect(out.lines.allSatisfy { $0.threadID == SpindleThread.current.threadID })
    }

    @Test(arguments: ["block-count", "counting-operation"])
    func countingToNineHundredNinetyNineBlocksTheCaller(name: String) throws {
        let out = try runExample(name)
        let expected = ["Main Thread = \(SpindleThread.main)", "Current Thread = \(SpindleThread.current)"]
            + (0..<1000).map { "Count = \($0)" } + ["Main thread is here"]
        #expect(out.texts == expected)
        #expect(out.lines.allSatisfy { $0.threadID == SpindleThread.current.threadID })
    }

    @Test func vinnyOperationRunsMainInsideStart() throws {
        let out = try runExample("vinny-operation")
        #expect(out.texts == [
            "start before",
            "main begin",
            "currentThread = \(SpindleThread.current)",
            "mainThread    = \(SpindleThread.main)",
            "main end",
            "start after",
        ])
        #expect(out.lines.allSatisfy { $0.threadID == SpindleThread.current.threadID })
    }

    @Test func myOperationRunsMainOnANewThreadThroughPerform() throws {
        let out = try runExample("my-operation")
        let caller = SpindleThread.current.threadID
        let before = out.index(of: "start before"), after = out.index(of: "start after")
        #expect(out.isOrdered(before, after))
        #expect(before.map { out.lines[$0].threadID } == caller && after.map { out.lines[$0].threadID } == caller)
        let begin = try #require(out.index(of: "main begin"))
        let worker = out.lines[begin].threadID
        #expect(worker != caller)
        let rest = out.following(begin, count: 3).map(\.text)
        #expect(rest.count == 3)
        #expect(rest.first?.hasPrefix("currentThread = SpindleThread(MyOperation, ") == true)
        #expect(rest.first?.hasSuffix(tidTag(worker)) == true)
        #expect(rest.dropFirst().first == "mainThread    = \(SpindleThread.main)")
        #expect(rest.last == "main end")
        #expect(out.lines.count == 6)
    }
}
