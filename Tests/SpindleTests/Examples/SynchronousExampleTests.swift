import Spindle
import SpindleExamplesKit
import Testing

/// Seed 000 §7.11 and seed 003 §1: operations started by hand run on the calling thread and `start()` returns when
/// the work is done. The calling thread stands in for the books' main thread.
@Suite struct SynchronousExampleTests {
    @Test func invocationOperationRunsOnTheCallingThread() throws {
        let (out, caller) = try runExampleOnCaller("invocation-start")
        #expect(out.texts == [
            "Parameter Object = 123",
            "Main Thread = \(SpindleThread.main)",
            "Current Thread = \(caller)",
        ])
        #expect(out.lines.allSatisfy { $0.threadID == caller.threadID })
    }

    @Test(arguments: ["block-count", "counting-operation"])
    func countingToNineHundredNinetyNineBlocksTheCaller(name: String) throws {
        let (out, caller) = try runExampleOnCaller(name)
        let expected = ["Main Thread = \(SpindleThread.main)", "Current Thread = \(caller)"]
            + (0..<1000).map { "Count = \($0)" } + ["Main thread is here"]
        #expect(out.texts == expected)
        #expect(out.lines.allSatisfy { $0.threadID == caller.threadID })
    }

    @Test func vinnyOperationRunsMainInsideStart() throws {
        let (out, caller) = try runExampleOnCaller("vinny-operation")
        #expect(out.texts == [
            "start before",
            "main begin",
            "currentThread = \(caller)",
            "mainThread    = \(SpindleThread.main)",
            "main end",
            "start after",
        ])
        #expect(out.lines.allSatisfy { $0.threadID == caller.threadID })
    }

    @Test func myOperationRunsMainOnANewThreadThroughPerform() throws {
        let (out, callerThread) = try runExampleOnCaller("my-operation")
        let caller = callerThread.threadID
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
