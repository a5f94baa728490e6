import Spindle
import SpindleExamplesKit
import Testing

/// The toolkit examples (issue 19): what each one prints, in order.
@Suite struct ToolkitExampleTests {
    @Test func retrySucceedsOnTheThirdAttemptAndTheHopelessOneGivesUpAfterThree() throws {
        let out = try runExample("retry")
        #expect(out.texts == [
            "attempt 1", "attempt 2", "attempt 3",
            "fetch: recipe.json (3 calls) after 3 attempts",
            "hopeless: 3 attempts, error 503 on attempt 3",
        ])
    }

    @Test func threadObjectStartsOnceStopsWhenCancelledAndNeverRunsWhenCancelledFirst() throws {
        let (out, caller) = try runExampleOnCaller("thread-object")
        #expect(out.texts == [
            "created: executing false, finished false",
            "second start: thread 'poller' was already started; a thread starts once",
            "poller: cancelled, stopping",
            "never: finished true, cancelled true",
        ])
        let poller = try #require(out.index(of: "poller: cancelled, stopping"))
        #expect(out.lines[poller].threadID != caller.threadID)
    }

    @Test func observedValuesCarryOldAndNew() throws {
        let out = try runExample("observed-values")
        #expect(out.texts == [
            "initial isFinished: false", "initial queuePriority: normal",
            "did queuePriority: normal → high", "did queuePriority: high → veryHigh",
            "main runs",
            "did isFinished: false → true",
        ])
    }

    /// Each download comes before its produced parse, the observers are told of each parse, the missing recipe
    /// produces nothing, and the group's dependent prints last, with the one child error.
    @Test func groupOperationRunsTheProducedParsesBeforeTheGroupsDependent() throws {
        let out = try runExample("group-operation")
        for recipe in ["pancakes", "risotto"] {
            #expect(out.isOrdered(out.index(of: "downloaded \(recipe)"), out.index(of: "parsed \(recipe)")))
            #expect(out.isOrdered(out.index(of: "downloaded \(recipe)"),
                                  out.index(of: "download \(recipe) produced parse \(recipe)")))
        }
        #expect(out.index(prefix: "downloaded soufflé") == nil && out.index(prefix: "parsed soufflé") == nil)
        let show = out.index(of: "show: every child of import has finished; missing: soufflé: 404 Not Found")
        #expect(show == out.lines.count - 1, "the group's dependent did not print last: \(out.lines)")
        #expect(out.lines.count == 7)
    }
}
