import Spindle
import SpindleExamplesKit
import Testing

/// The toolkit examples ("Advanced NSOperations"): the orders they print.
@Suite struct ToolkitExampleTests {
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
