import Spindle
import SpindleExamplesKit
import Testing

/// Seed 000 §7.12 and seed 004's queue: operations added to a queue run on its threads while the adding thread
/// goes on; a queue of width 2 never runs more than two at once.
@Suite struct QueueExampleTests {
    /// Each operation prints a header then three lines on its own thread: checks them, returns the threads used.
    private func checkQueuedEntries(_ out: CapturingOutput, caller: Int32, headerPrefix: String,
                                    values: Set<String>) -> Set<Int32> {
        let headers = out.indices(prefix: headerPrefix)
        #expect(headers.count == 2)
        var seen = Set<String>()
        var threads = Set<Int32>()
        for header in headers {
            let tid = out.lines[header].threadID
            #expect(tid != caller)
            threads.insert(tid)
            let body = out.following(header, count: 3).map(\.text)
            #expect(body.count == 3)
            if body.count == 3 {
                seen.insert(body[0])
                #expect(body[1] == "Main Thread = \(SpindleThread.main)")
                #expect(body[2].hasPrefix("Current Thread = SpindleThread(") && body[2].hasSuffix(tidTag(tid)))
            }
        }
        #expect(seen == values)
        let mainHere = out.index(of: "Main thread is here")
        #expect(mainHere.map { out.lines[$0].threadID } == caller)
        return threads
    }

    @Test(qtOwnThreadsOnly) func invocationOperationsOnAQueueRunOnItsWorkers() throws {
        let (out, caller) = try runExampleOnCaller("invocation-queue")
        #expect(out.lines.count == 9)
        let first = out.index(of: "[AsynchronousAppDelegate firstOperationEntry(_:)]")
        let second = out.index(of: "[AsynchronousAppDelegate secondOperationEntry(_:)]")
        #expect(first != nil && second != nil)
        let threads = self.checkQueuedEntries(out, caller: caller.threadID, headerPrefix: "[AsynchronousAppDelegate ",
                                              values: ["Parameter Object = 111", "Parameter Object = 222"])
        for tid in threads {
            #expect(out.lines.contains { $0.text.hasPrefix("Current Thread = SpindleThread(spindle.w") && $0.threadID == tid })
        }
    }

    @Test func simpleOperationsRunOnThreadsOfTheirOwn() throws {
        let (out, caller) = try runExampleOnCaller("simple-operation")
        #expect(out.lines.count == 9)
        let threads = self.checkQueuedEntries(out, caller: caller.threadID, headerPrefix: "-[SimpleOperation main()]",
                                              values: ["Parameter Object = 111", "Parameter Object = 222"])
        #expect(threads.count == 2)  // each concurrent operation spawns its own thread for main
    }

    @Test func widthTwoIsNeverExceeded() throws {
        let out = try runExample("width-2")
        #expect(out.texts.first == "maxConcurrentOperationCount = 2")
        var running = 0, most = 0
        var begun = Set<Int>(), ended = Set<Int>()
        for text in out.texts {
            if text.hasPrefix("job "), let number = Int(text.dropFirst(4).prefix { $0.isNumber }) {
                if text.contains(" begins on ") {
                    running += 1
                    most = max(most, running)
                    begun.insert(number)
                } else if text.hasSuffix(" ends") {
                    #expect(begun.contains(number), "job \(number) ended before it began")
                    running -= 1
                    ended.insert(number)
                }
            }
        }
        #expect(most <= 2)
        #expect(begun == Set(1...6) && ended == Set(1...6))
        let reported = out.texts.last.flatMap { Int($0.split(separator: " ").last ?? "") }
        #expect(out.texts.last?.hasPrefix("most jobs running at once: ") == true)
        #expect(reported.map { (1...2).contains($0) } == true)
    }
}
