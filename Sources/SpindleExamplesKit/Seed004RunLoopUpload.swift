import Spindle

// Seed 004 "Waiting and cancelling in an operation", first way: the recipe upload's `main` starts an
// asynchronous upload and runs its thread's run loop until the upload's callback — or `cancel()` from any
// thread — invalidates the port scheduled on that loop.

/// The book's `RecipetUploadOperation` with a run loop and a port: uploads an image, then (unless cancelled) the
/// recipe's JSON, waiting in `main` for each callback.
///
/// Guards: `port` (the port the current wait is on, nil between waits) under `portLock`. Lock order: `portLock`
/// only; no Spindle call other than reading the port is made under it.
final class RecipeUploadOperation: SpindleOperation, @unchecked Sendable {
    let title: String
    let image: [UInt8]
    let json: String
    let api: FakeRecipeAPI
    let out: any ExampleOutput
    /// Signalled once the image upload has started and `main` is about to wait for it.
    let imageUploadStarted = try! SpindleSemaphore(value: 0)
    private let portLock = SpindleMutex(.normal)
    private var port: SpindlePort<String>?  // guarded by portLock

    init(title: String, image: [UInt8], json: String, api: FakeRecipeAPI, output: any ExampleOutput) {
        self.title = title
        self.image = image
        self.json = json
        self.api = api
        self.out = output
        super.init()
        self.name = title
    }

    override func main() throws {
        self.out.line("[\(self.title)] uploading image (\(self.image.count) bytes) on \(SpindleThread.current)")
        let imagePort = try self.prepareRunLoop()
        try self.api.upload("image of \(self.title)") { reply in self.quitRunLoop(imagePort, reply: reply) }
        self.imageUploadStarted.signal()
        try self.doRunLoop(imagePort)
        if self.isCancelled {
            self.out.line("[\(self.title)] cancelled during the image upload: the JSON is not sent")
            return
        }
        self.out.line("[\(self.title)] uploading JSON (\(self.json.utf8.count) bytes)")
        let jsonPort = try self.prepareRunLoop()
        try self.api.upload("JSON of \(self.title)") { reply in self.quitRunLoop(jsonPort, reply: reply) }
        try self.doRunLoop(jsonPort)
        if self.isCancelled {
            self.out.line("[\(self.title)] cancelled during the JSON upload")
            return
        }
        self.out.line("[\(self.title)] recipe uploaded")
    }

    /// The first half of the book's `doRunloop`: a new port on this thread's run loop, scheduled before the upload
    /// starts (so a reply that comes at once is not lost) and published for `cancel()`.
    private func prepareRunLoop() throws -> SpindlePort<String> {
        let port = SpindlePort<String>(name: "upload \(self.title)") { reply in
            // Delivered by the run loop, on this operation's thread.
            self.out.line("[\(self.title)] server replied \(reply) on \(SpindleThread.current)")
        }
        try SpindleRunLoop.current.add(port, forMode: .common)
        self.portLock.withLock { self.port = port }
        // A cancel() that read the previous port (or none) has set isCancelled before that read: seeing it here
        // means no one else will invalidate this port.
        if self.isCancelled { port.invalidate() }
        return port
    }

    /// The second half of `doRunloop`: runs this thread's run loop until `port` is invalidated. No polling: an
    /// invalidation from any thread wakes the loop at once.
    private func doRunLoop(_ port: SpindlePort<String>) throws {
        guard try SpindleRunLoop.current.run(untilInvalidated: port, before: .after(.seconds(30))) else {
            throw ExampleFailure("[\(self.title)] no reply within 30 s")
        }
        self.portLock.withLock { self.port = nil }
    }

    /// The book's `quitRunLoop`, called by the upload's callback: hands the reply to the waiting thread through
    /// the port, then invalidates it, which ends the wait. A reply that comes after a cancel finds the port
    /// invalidated and is dropped.
    private func quitRunLoop(_ port: SpindlePort<String>, reply: String) {
        do {
            try port.send(reply)
            port.invalidate()
        } catch {
            self.out.line("[\(self.title)] late reply dropped: \(error)")
        }
    }

    /// Cancels, and ends the current wait at once by invalidating its port (from any thread).
    override func cancel() {
        super.cancel()
        self.portLock.withLock { self.port }?.invalidate()
    }
}

extension SpindleExamples {
    /// Seed 004: two recipe uploads on a width-2 queue waiting with a run loop and a port; the second is
    /// cancelled in the middle of its image upload.
    static func uploadRunLoop(_ out: any ExampleOutput) throws {
        let queue = SpindleOperationQueue(name: "recipe uploads")
        try queue.setMaxConcurrentOperationCount(2)
        let fastServer = FakeRecipeAPI(latency: .milliseconds(50))
        let slowServer = FakeRecipeAPI(latency: .seconds(30))
        let pancakes = RecipeUploadOperation(
            title: "pancakes", image: [UInt8](repeating: 7, count: 2048), json: #"{"title":"Pancakes"}"#,
            api: fastServer, output: out)
        let bread = RecipeUploadOperation(
            title: "bread", image: [UInt8](repeating: 9, count: 4096), json: #"{"title":"Bread"}"#,
            api: slowServer, output: out)
        try queue.addOperations([pancakes, bread])

        try expectSignal(bread.imageUploadStarted, "the bread image upload to start")
        out.line("cancelling [bread] in the middle of its image upload")
        bread.cancel()
        try queue.waitUntilAllOperationsAreFinished()

        slowServer.replyNow()  // the slow server answers at last: the reply finds the port invalidated
        try slowServer.join()
        try fastServer.join()
        out.line("[pancakes] cancelled: \(pancakes.isCancelled), [bread] cancelled: \(bread.isCancelled)")
    }
}
