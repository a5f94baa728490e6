import Spindle

// Apple's "Advanced NSOperations" (WWDC 2015) toolkit, on Spindle: a group operation whose children download
// recipes, each download producing the operation that parses what it fetched (into the group, which waits for it
// too); the group's dependent runs once every child has finished, and reads the children's errors.

/// A recipe the server does not have.
struct RecipeNotFound: Error, CustomStringConvertible {
    let recipe: String
    var description: String { "\(self.recipe): 404 Not Found" }
}

/// Downloads one recipe (simulated), then produces the operation that parses it.
final class DownloadRecipe: SpindleOperation, @unchecked Sendable {
    let recipe: String
    let out: any ExampleOutput

    init(_ recipe: String, output: any ExampleOutput) {
        self.recipe = recipe
        self.out = output
        super.init()
        self.name = "download \(recipe)"
    }

    override func main() throws {
        simulateWork(milliseconds: 5)
        guard self.recipe != "soufflé" else { throw RecipeNotFound(recipe: self.recipe) }
        self.out.line("downloaded \(self.recipe)")
        try self.produce(ParseRecipe(self.recipe, output: self.out))  // into the group this download is in
    }
}

/// Parses a downloaded recipe (simulated).
final class ParseRecipe: SpindleOperation, @unchecked Sendable {
    let recipe: String
    let out: any ExampleOutput

    init(_ recipe: String, output: any ExampleOutput) {
        self.recipe = recipe
        self.out = output
        super.init()
        self.name = "parse \(recipe)"
    }

    override func main() throws {
        simulateWork(milliseconds: 2)
        self.out.line("parsed \(self.recipe)")
    }
}

extension SpindleExamples {
    /// A group of three downloads (one recipe is missing), each producing its parse; a dependent of the group runs
    /// after every child, the produced parses included, on a width-1 queue (the group holds its slot, no thread).
    static func groupOperation(_ out: any ExampleOutput) throws {
        let queue = try SpindleOperationQueue(name: "recipes", maxConcurrentOperationCount: 1)
        let downloads = ["pancakes", "risotto", "soufflé"].map { DownloadRecipe($0, output: out) }
        for download in downloads {
            download.observe([.producedOperation]) { producer, change in
                out.line("\(producer.displayName) produced \(change.newValue)")  // the sample's didProduceOperation
            }
        }
        let importRecipes = try SpindleGroupOperation(operations: downloads, maxConcurrentOperationCount: 2)
        importRecipes.name = "import"
        let show = SpindleBlockOperation { [unowned importRecipes] in
            let missing = importRecipes.childErrors.map { "\($0)" }
            out.line("show: every child of import has finished; missing: \(missing.joined(separator: ", "))")
        }
        try show.addDependency(importRecipes)
        try queue.addOperations([importRecipes, show])
        try show.waitUntilFinished()
    }
}
